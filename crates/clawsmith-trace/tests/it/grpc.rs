//! clawsmith-trace against a real OTLP/gRPC receiver on 127.0.0.1: tonic's server with
//! opentelemetry-proto's `TraceService`, on a tokio runtime of the test's own.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clawsmith_trace::otlp::{OtlpConfig, OtlpProtocol, install};
use clawsmith_trace::{Tracer, semconv};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

use crate::attribute;

/// One export call as the receiver saw it.
pub(crate) struct Export {
    pub(crate) metadata: Vec<(String, String)>,
    pub(crate) request: ExportTraceServiceRequest,
}

#[derive(Clone, Default)]
struct Recorder {
    exports: Arc<Mutex<Vec<Export>>>,
}

#[tonic::async_trait]
impl TraceService for Recorder {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let metadata = request
            .metadata()
            .clone()
            .into_headers()
            .iter()
            .map(|(key, value)| {
                (
                    key.as_str().to_owned(),
                    value.to_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        // Kept before the answer goes out, so a flush that returned has been seen.
        self.exports.lock().unwrap().push(Export {
            metadata,
            request: request.into_inner(),
        });
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

pub(crate) struct GrpcReceiver {
    address: SocketAddr,
    recorder: Recorder,
    /// Serves until the test ends (the runtime is dropped with it).
    _runtime: tokio::runtime::Runtime,
}

impl GrpcReceiver {
    fn start() -> GrpcReceiver {
        GrpcReceiver::serve(None)
    }

    /// Over TLS: tonic's server with `tls` (its identity, and the client authority it requires).
    pub(crate) fn start_tls(tls: tonic::transport::ServerTlsConfig) -> GrpcReceiver {
        GrpcReceiver::serve(Some(tls))
    }

    fn serve(tls: Option<tonic::transport::ServerTlsConfig>) -> GrpcReceiver {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let address = listener.local_addr().unwrap();
        let recorder = Recorder::default();
        let service = TraceServiceServer::new(recorder.clone());
        runtime.spawn(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let mut server = Server::builder();
            if let Some(tls) = tls {
                server = server.tls_config(tls).unwrap();
            }
            // A client refused by the handshake ends its connection, not the server.
            let _ = server
                .serve_with_incoming(service, TcpIncoming::from(listener))
                .await;
        });
        GrpcReceiver {
            address,
            recorder,
            _runtime: runtime,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The names of the spans exported since the last look, in order.
    pub(crate) fn span_names(&self) -> Vec<String> {
        self.exports()
            .into_iter()
            .flat_map(|export| export.request.resource_spans)
            .flat_map(|resource| resource.scope_spans)
            .flat_map(|scope| scope.spans)
            .map(|span| span.name)
            .collect()
    }

    pub(crate) fn exports(&self) -> Vec<Export> {
        std::mem::take(&mut *self.recorder.exports.lock().unwrap())
    }
}

fn grpc_config(pairs: &[(&str, String)]) -> OtlpConfig {
    let config = OtlpConfig::from_env(|name| {
        pairs
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.clone())
    })
    .unwrap()
    .unwrap();
    assert_eq!(config.protocol, OtlpProtocol::Grpc);
    config
}

#[test]
fn spans_reach_a_grpc_collector_with_names_attributes_parents_and_metadata() {
    let receiver = GrpcReceiver::start();
    let config = grpc_config(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "x-api-key=s3cret,X-Team=core%20tools".to_owned(),
        ),
        ("OTEL_SERVICE_NAME", "clawsmith-grpc".to_owned()),
    ]);
    // Used as-is: gRPC has no /v1/traces path.
    assert_eq!(config.traces_endpoint, receiver.url());
    let tracer = install(&config).unwrap();
    let mut turn = tracer.start(None, || semconv::TURN_SPAN.to_owned());
    turn.set_attribute(semconv::CLAWSMITH_TURN_ID, "turn_9".to_owned());
    let mut call = tracer.start(turn.context(), || {
        semconv::execute_tool_span_name("read_file")
    });
    call.set_attribute(semconv::GEN_AI_TOOL_NAME, "read_file");
    call.set_attribute(semconv::GEN_AI_OPERATION_NAME, semconv::EXECUTE_TOOL);
    call.add_event(
        semconv::EVENT_PERMISSION,
        vec![("decision", "allow".into())],
    );
    call.end();
    turn.end();
    let tally = tracer.finish(Duration::from_secs(10)).unwrap();
    assert_eq!((tally.finished, tally.exported, tally.lost()), (2, 2, 0));

    let exports = receiver.exports();
    assert!(!exports.is_empty(), "the flush called Export");
    let mut spans = Vec::new();
    for export in exports {
        let metadata = |name: &str| {
            export
                .metadata
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
        };
        assert_eq!(metadata("x-api-key").as_deref(), Some("s3cret"));
        assert_eq!(metadata("x-team").as_deref(), Some("core tools"));
        for resource_spans in export.request.resource_spans {
            let service = resource_spans
                .resource
                .unwrap()
                .attributes
                .into_iter()
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value?.value);
            assert_eq!(service, Some(Value::StringValue("clawsmith-grpc".into())));
            for scope_spans in resource_spans.scope_spans {
                spans.extend(scope_spans.spans);
            }
        }
    }
    assert_eq!(spans.len(), 2, "{spans:?}");
    let turn = spans.iter().find(|s| s.name == "clawsmith.turn").unwrap();
    let call = spans
        .iter()
        .find(|s| s.name == "execute_tool read_file")
        .unwrap();
    assert_eq!(call.trace_id, turn.trace_id);
    assert_eq!(call.parent_span_id, turn.span_id);
    assert_eq!(
        attribute(turn, semconv::CLAWSMITH_TURN_ID).as_deref(),
        Some("turn_9")
    );
    assert_eq!(
        attribute(call, semconv::GEN_AI_TOOL_NAME).as_deref(),
        Some("read_file")
    );
    assert_eq!(
        attribute(call, semconv::GEN_AI_OPERATION_NAME).as_deref(),
        Some("execute_tool")
    );
    assert_eq!(call.events.len(), 1);
    assert_eq!(call.events[0].name, semconv::EVENT_PERMISSION);
}

#[test]
fn a_traces_endpoint_for_grpc_is_used_as_is_and_flush_delivers() {
    let receiver = GrpcReceiver::start();
    let config = grpc_config(&[
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://ignored:4317".to_owned(),
        ),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.url()),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc".to_owned()),
    ]);
    assert_eq!(config.traces_endpoint, receiver.url());
    let tracer = install(&config).unwrap();
    tracer
        .start(None, || semconv::execute_tool_span_name("grep"))
        .end();
    tracer.flush();
    assert_eq!(receiver.span_names(), ["execute_tool grep"]);
}

#[test]
fn a_dead_or_silent_grpc_collector_neither_blocks_nor_fails_the_span() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // And one that accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in silent.incoming().flatten() {
            held.push(stream);
        }
    });
    for url in [format!("http://127.0.0.1:{port}"), silent_url] {
        let config = grpc_config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", url),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
        ]);
        let tracer = install(&config).unwrap();
        for _ in 0..10 {
            tracer.start(None, || "lost".to_owned()).end();
        }
        assert!(tracer.is_enabled());
        // The silent collector would hold the export for its 10 s timeout: the bound cuts it.
        let tally = tracer.finish(Duration::from_millis(500)).unwrap();
        assert_eq!((tally.finished, tally.exported, tally.lost()), (10, 0, 10));
    }
    assert_eq!(Tracer::noop().finish(Duration::from_secs(5)), None);
}
