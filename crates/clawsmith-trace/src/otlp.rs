//! OTLP export (feature `otlp`): [`OtlpConfig::from_env`] reads the standard `OTEL_*` variables,
//! [`install`] turns them into a [`Tracer`] whose sink hands each finished span to the
//! OpenTelemetry SDK's batch processor.
//!
//! The batch processor owns a bounded queue (2048 spans) and a thread of its own that hands
//! batches to the exporter, so [`SpanSink::export`] never waits on the network: a full queue
//! drops the span and the call goes on. [`SpanSink::flush`] sends what is queued; each export
//! request times out after 10 s. [`SpanSink::finish`] is the flush at exit: it waits for the
//! collector at most its bound (the flush runs on a thread of its own, abandoned when the bound
//! passes) and tallies the spans the sink took against those a collector acknowledged, so the
//! front end can say how many were lost (queue full, collector down or too slow).
//!
//! Supported: `http/protobuf` (the default), `http/json` and `grpc`, over `http://` or
//! `https://`. For HTTP the endpoint `OTEL_EXPORTER_OTLP_ENDPOINT` gets `/v1/traces` appended; for
//! gRPC it is used as-is (the OTLP exporter spec: the collector's address, usually
//! `http://localhost:4317`). `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is always used as-is, and
//! `OTEL_EXPORTER_OTLP_HEADERS` become request headers or gRPC metadata. An unknown protocol and
//! any other scheme are refused with an error naming what is supported.
//!
//! TLS (an `https://` endpoint): the server's certificate is checked against the webpki roots
//! (Mozilla's list, built in: nothing is read from the host's store) and the certificate
//! authorities of `OTEL_EXPORTER_OTLP_CERTIFICATE` (a PEM file; `…_TRACES_CERTIFICATE` wins),
//! for a private collector; `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE` and `…_CLIENT_KEY` (PEM files,
//! both or neither) are the client's identity for mutual TLS. The files are read at [`install`];
//! a missing or unparsable one is refused by its variable's name. TLS settings with an `http://`
//! endpoint are refused too: they say the user expects an encrypted connection. HTTP requests
//! do not follow redirects (a redirect would carry the headers, often an API key, elsewhere).
//!
//! Both exporters run on a tokio runtime with one worker thread that the sink owns: the HTTP
//! exporter's client is the workspace's reqwest (rustls with ring, the agent's providers'
//! stack) behind opentelemetry-http's `HttpClient`, the gRPC exporter is tonic's (the same
//! rustls). The SDK's batch thread has a plain executor, so each export is spawned on that
//! runtime and awaited from the batch thread (`OnRuntime`). Queue, drop counting,
//! [`SpanSink::flush`] and the bounded [`SpanSink::finish`] are the same for every protocol.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
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
    /// Certificates for an `https://` endpoint (empty for `http://`).
    pub tls: OtlpTls,
}

/// The TLS settings of an `https://` endpoint: files named by the `OTEL_*` variables, read at
/// [`install`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OtlpTls {
    /// A PEM file of certificate authorities trusted besides the webpki roots
    /// (`OTEL_EXPORTER_OTLP_CERTIFICATE`), with the variable that named it.
    pub certificate: Option<(&'static str, PathBuf)>,
    /// The client's PEM certificate and key for mutual TLS
    /// (`OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`, `OTEL_EXPORTER_OTLP_CLIENT_KEY`), with the
    /// variables that named them.
    pub client: Option<[(&'static str, PathBuf); 2]>,
}

impl OtlpTls {
    fn is_empty(&self) -> bool {
        self.certificate.is_none() && self.client.is_none()
    }
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
    /// Neither an `http://` nor an `https://` URL.
    #[error("{variable}={value} is not supported: only http:// and https:// endpoints")]
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
    /// A TLS setting that cannot be used: one half of the client's identity, TLS files for an
    /// `http://` endpoint, or a file that cannot be read or holds no usable PEM.
    #[error("{variable}: {reason}")]
    Tls {
        /// The variable at fault (`OTEL_EXPORTER_OTLP_CERTIFICATE`, …).
        variable: &'static str,
        /// What is wrong with it.
        reason: String,
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
        let https = traces_endpoint.starts_with("https://");
        if !https && !traces_endpoint.starts_with("http://") {
            return Err(OtlpConfigError::Endpoint {
                variable,
                value: traces_endpoint,
            });
        }
        let tls = tls_from_env(&set)?;
        if !https && !tls.is_empty() {
            let variable = tls
                .certificate
                .as_ref()
                .map(|(name, _)| *name)
                .or_else(|| tls.client.as_ref().map(|[(name, _), _]| *name))
                .unwrap_or("OTEL_EXPORTER_OTLP_CERTIFICATE");
            return Err(OtlpConfigError::Tls {
                variable,
                reason: format!(
                    "TLS files are set but the endpoint {traces_endpoint} is not https://: spans would not be encrypted"
                ),
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
            tls,
        }))
    }
}

/// The TLS variables: each `OTEL_EXPORTER_OTLP_TRACES_*` one wins over its general twin.
fn tls_from_env(set: &impl Fn(&str) -> Option<String>) -> Result<OtlpTls, OtlpConfigError> {
    let file = |traces: &'static str, general: &'static str| {
        [traces, general]
            .into_iter()
            .find_map(|variable| set(variable).map(|value| (variable, PathBuf::from(value))))
    };
    let certificate = file(
        "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_CERTIFICATE",
    );
    let client_certificate = file(
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
    );
    let client_key = file(
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
        "OTEL_EXPORTER_OTLP_CLIENT_KEY",
    );
    let client = match (client_certificate, client_key) {
        (Some(certificate), Some(key)) => Some([certificate, key]),
        (None, None) => None,
        (Some((variable, _)), None) => {
            return Err(OtlpConfigError::Tls {
                variable,
                reason: "set without OTEL_EXPORTER_OTLP_CLIENT_KEY: mutual TLS needs both".into(),
            });
        }
        (None, Some((variable, _))) => {
            return Err(OtlpConfigError::Tls {
                variable,
                reason: "set without OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: mutual TLS needs both"
                    .into(),
            });
        }
    };
    Ok(OtlpTls {
        certificate,
        client,
    })
}

/// The TLS files of `tls`, read and checked once: the PEM text tonic takes, and what reqwest
/// parsed from it.
struct TlsFiles {
    /// The authorities' PEM and its certificates.
    authorities: Option<(Vec<u8>, Vec<reqwest::Certificate>)>,
    /// The client's certificate and key PEM, and the identity made of them.
    client: Option<(Vec<u8>, Vec<u8>, reqwest::Identity)>,
}

impl TlsFiles {
    fn read(tls: &OtlpTls) -> Result<TlsFiles, OtlpConfigError> {
        let read = |(variable, path): &(&'static str, PathBuf)| {
            std::fs::read(path).map_err(|error| OtlpConfigError::Tls {
                variable,
                reason: format!("cannot read {}: {error}", path.display()),
            })
        };
        let authorities = match &tls.certificate {
            Some(named) => {
                let pem = read(named)?;
                match reqwest::Certificate::from_pem_bundle(&pem) {
                    Ok(found) if !found.is_empty() => Some((pem, found)),
                    Ok(_) => return Err(no_pem(named, "certificate")),
                    Err(error) => return Err(bad_pem(named, &error)),
                }
            }
            None => None,
        };
        let client = match &tls.client {
            Some([certificate, key]) => {
                let certificate_pem = read(certificate)?;
                let key_pem = read(key)?;
                match reqwest::Certificate::from_pem_bundle(&certificate_pem) {
                    Ok(found) if !found.is_empty() => {}
                    Ok(_) => return Err(no_pem(certificate, "certificate")),
                    Err(error) => return Err(bad_pem(certificate, &error)),
                }
                let mut both = key_pem.clone();
                both.push(b'\n');
                both.extend_from_slice(&certificate_pem);
                let identity =
                    reqwest::Identity::from_pem(&both).map_err(|error| bad_pem(key, &error))?;
                Some((certificate_pem, key_pem, identity))
            }
            None => None,
        };
        Ok(TlsFiles {
            authorities,
            client,
        })
    }
}

fn no_pem((variable, path): &(&'static str, PathBuf), what: &str) -> OtlpConfigError {
    OtlpConfigError::Tls {
        variable,
        reason: format!("{} holds no PEM {what}", path.display()),
    }
}

fn bad_pem((variable, path): &(&'static str, PathBuf), error: &reqwest::Error) -> OtlpConfigError {
    OtlpConfigError::Tls {
        variable,
        reason: format!("{} is not usable: {error}", path.display()),
    }
}

/// A tracer exporting to `config`'s collector.
pub fn install(config: &OtlpConfig) -> Result<Tracer, OtlpConfigError> {
    let exported = Arc::new(AtomicU64::new(0));
    let resource = Resource::builder_empty()
        .with_service_name(config.service_name.clone())
        .build();
    let files = TlsFiles::read(&config.tls)?;
    let exporter = match config.protocol {
        OtlpProtocol::HttpProtobuf => OnRuntime::http(config, Protocol::HttpBinary, &files)?,
        OtlpProtocol::HttpJson => OnRuntime::http(config, Protocol::HttpJson, &files)?,
        OtlpProtocol::Grpc => OnRuntime::grpc(config, &files)?,
    };
    Ok(tracer(exporter, &resource, exported))
}

/// The largest answer a collector may send to an export (opentelemetry-http's own clients' bound).
const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// The HTTP exporter's client: the workspace's reqwest (rustls with ring, webpki roots plus
/// the configured authorities, no redirects, the export timeout), run on [`OnRuntime`]'s
/// runtime.
#[derive(Debug)]
struct ReqwestClient(reqwest::Client);

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for ReqwestClient {
    async fn send_bytes(
        &self,
        request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
    ) -> Result<
        opentelemetry_http::Response<opentelemetry_http::Bytes>,
        opentelemetry_http::HttpError,
    > {
        let request = reqwest::Request::try_from(request)?;
        let mut response = self.0.execute(request).await?;
        let status = response.status();
        let headers = std::mem::take(response.headers_mut());
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(format!(
                    "the collector's answer is larger than {MAX_RESPONSE_BYTES} bytes"
                )
                .into());
            }
            body.extend_from_slice(&chunk);
        }
        let mut answer = opentelemetry_http::Response::builder()
            .status(status)
            .body(opentelemetry_http::Bytes::from(body))?;
        *answer.headers_mut() = headers;
        Ok(answer)
    }
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

/// An exporter that must run on a tokio runtime (tonic's channel, reqwest's client), driven
/// from the SDK's batch thread: each export is spawned on the runtime's one worker and awaited
/// there, so the batch thread's plain executor only waits for the result.
#[derive(Debug)]
struct OnRuntime<E> {
    inner: Arc<E>,
    /// `None` once dropped (shut down in the background: dropping a runtime blocks).
    runtime: Option<tokio::runtime::Runtime>,
}

impl OnRuntime<opentelemetry_otlp::SpanExporter> {
    /// `build` run inside a runtime of its own (tonic's lazy channel spawns its worker task
    /// there), which then runs every export.
    fn build(
        build: impl FnOnce() -> Result<
            opentelemetry_otlp::SpanExporter,
            opentelemetry_otlp::ExporterBuildError,
        >,
    ) -> Result<Self, OtlpConfigError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("clawsmith-otlp")
            .enable_all()
            .build()
            .map_err(|error| OtlpConfigError::Exporter(error.to_string()))?;
        let built = {
            let _entered = runtime.enter();
            build()
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

    /// The HTTP exporter for `config` in `protocol`.
    fn http(
        config: &OtlpConfig,
        protocol: Protocol,
        files: &TlsFiles,
    ) -> Result<Self, OtlpConfigError> {
        let mut client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        if let Some((_, authorities)) = &files.authorities {
            for authority in authorities {
                client = client.add_root_certificate(authority.clone());
            }
        }
        if let Some((_, _, identity)) = &files.client {
            client = client.identity(identity.clone());
        }
        let client = ReqwestClient(
            client
                .build()
                .map_err(|error| OtlpConfigError::Exporter(error.to_string()))?,
        );
        let headers: HashMap<String, String> = config.headers.iter().cloned().collect();
        OnRuntime::build(|| {
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(client)
                .with_endpoint(config.traces_endpoint.clone())
                .with_protocol(protocol)
                .with_headers(headers)
                .with_timeout(EXPORT_TIMEOUT)
                .build()
        })
    }

    /// The gRPC exporter for `config`.
    fn grpc(config: &OtlpConfig, files: &TlsFiles) -> Result<Self, OtlpConfigError> {
        use opentelemetry_otlp::WithTonicConfig;
        use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};

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
        let tls = config.traces_endpoint.starts_with("https://").then(|| {
            let mut tls = ClientTlsConfig::new().with_webpki_roots();
            if let Some((authorities, _)) = &files.authorities {
                tls = tls.ca_certificate(Certificate::from_pem(authorities));
            }
            if let Some((certificate, key, _)) = &files.client {
                tls = tls.identity(Identity::from_pem(certificate, key));
            }
            tls
        });
        OnRuntime::build(|| {
            let builder = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(config.traces_endpoint.clone())
                .with_metadata(metadata)
                .with_timeout(EXPORT_TIMEOUT);
            match tls {
                Some(tls) => builder.with_tls_config(tls).build(),
                None => builder.build(),
            }
        })
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
        let table: [(&[(&str, &str)], &str); 10] = [
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
                        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                        "collector.example:4317",
                    ),
                    ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
                ],
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=collector.example:4317 is not supported: only http:// and https:// endpoints",
            ),
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector.example")],
                "OTEL_EXPORTER_OTLP_ENDPOINT=ftp://collector.example/v1/traces is not supported: only http:// and https:// endpoints",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
                    ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
                ],
                "OTEL_EXPORTER_OTLP_HEADERS: `novalue` is not key=value",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
                    ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ca.pem"),
                ],
                "OTEL_EXPORTER_OTLP_CERTIFICATE: TLS files are set but the endpoint http://h:4318/v1/traces is not https://: spans would not be encrypted",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4317"),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                    ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/c.pem"),
                    ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/k.pem"),
                ],
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: TLS files are set but the endpoint http://h:4317 is not https://: spans would not be encrypted",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://h:4318"),
                    ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/c.pem"),
                ],
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: set without OTEL_EXPORTER_OTLP_CLIENT_KEY: mutual TLS needs both",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://h:4318"),
                    ("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "/k.pem"),
                ],
                "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY: set without OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: mutual TLS needs both",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://h:4318"),
                    ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/k.pem"),
                ],
                "OTEL_EXPORTER_OTLP_CLIENT_KEY: set without OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: mutual TLS needs both",
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

    #[test]
    fn https_endpoints_and_their_tls_files_are_read_by_name() {
        let read = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector.example"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/general/ca.pem"),
            ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "/traces/ca.pem"),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/client.pem"),
            ("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "/client.key"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(read.traces_endpoint, "https://collector.example/v1/traces");
        assert_eq!(
            read.tls,
            OtlpTls {
                certificate: Some((
                    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
                    "/traces/ca.pem".into()
                )),
                client: Some([
                    (
                        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                        "/client.pem".into()
                    ),
                    ("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "/client.key".into()),
                ]),
            }
        );
        let plain = config(&[
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "https://collector.example:4317",
            ),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(plain.traces_endpoint, "https://collector.example:4317");
        assert_eq!(plain.tls, OtlpTls::default());
    }

    /// TLS files that cannot be used are refused at install, by variable, for every protocol.
    #[test]
    fn unusable_tls_files_are_refused_at_install_by_name() {
        let directory = std::env::temp_dir().join(format!(
            "clawsmith-otlp-tls-{}-{}",
            std::process::id(),
            line!()
        ));
        std::fs::create_dir_all(&directory).unwrap();
        let garbage = directory.join("garbage.pem");
        std::fs::write(&garbage, "not a certificate\n").unwrap();
        let missing = directory.join("missing.pem");
        let broken = directory.join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN CERTIFICATE-----\nAAAA!!!!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        for protocol in ["http/protobuf", "http/json", "grpc"] {
            for (variable, path, expected) in [
                (
                    "OTEL_EXPORTER_OTLP_CERTIFICATE",
                    &missing,
                    format!(
                        "OTEL_EXPORTER_OTLP_CERTIFICATE: cannot read {}: ",
                        missing.display()
                    ),
                ),
                (
                    "OTEL_EXPORTER_OTLP_CERTIFICATE",
                    &garbage,
                    format!(
                        "OTEL_EXPORTER_OTLP_CERTIFICATE: {} holds no PEM certificate",
                        garbage.display()
                    ),
                ),
                (
                    "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
                    &broken,
                    format!(
                        "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE: {} is not usable: ",
                        broken.display()
                    ),
                ),
            ] {
                let path = path.to_str().unwrap();
                let read = config(&[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:9"),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
                    (variable, path),
                ])
                .unwrap()
                .unwrap();
                let refused = install(&read).unwrap_err().to_string();
                assert!(
                    refused.starts_with(&expected),
                    "{protocol}, {variable}={path}: {refused}"
                );
            }
            // A client certificate without a key in the key file.
            let read = config(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:9"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
                (
                    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                    garbage.to_str().unwrap(),
                ),
                ("OTEL_EXPORTER_OTLP_CLIENT_KEY", garbage.to_str().unwrap()),
            ])
            .unwrap()
            .unwrap();
            assert_eq!(
                install(&read).unwrap_err().to_string(),
                format!(
                    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: {} holds no PEM certificate",
                    garbage.display()
                ),
                "{protocol}"
            );
        }
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
