//! clawsmith-trace against OTLP receivers over TLS on 127.0.0.1: a certificate authority made by
//! rcgen for each test, the HTTP receiver behind rustls, tonic's server with its TLS settings.
//! What must hold: spans reach a collector whose certificate the configured authority signed,
//! never one whose certificate nobody trusts, and a collector that asks for a client certificate
//! gets the configured one.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clawsmith_trace::otlp::{OtlpConfig, install};
use clawsmith_trace::{ExportTally, Tracer, semconv};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::grpc::GrpcReceiver;
use crate::receiver::{self, Receiver};

/// A certificate authority and what it signed, with PEM files in a directory of the test's.
struct Pki {
    directory: PathBuf,
    authority: CertifiedIssuer<'static, KeyPair>,
    server: (rcgen::Certificate, KeyPair),
}

impl Pki {
    fn new(name: &str) -> Pki {
        let directory = std::env::temp_dir().join(format!(
            "clawsmith-otlp-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&directory).unwrap();
        let authority = authority(name);
        let server = leaf(
            &authority,
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        std::fs::write(directory.join("ca.pem"), authority.pem()).unwrap();
        let (client, client_key) = leaf(&authority, &[], ExtendedKeyUsagePurpose::ClientAuth);
        std::fs::write(directory.join("client.pem"), client.pem()).unwrap();
        std::fs::write(directory.join("client.key"), client_key.serialize_pem()).unwrap();
        Pki {
            directory,
            authority,
            server,
        }
    }

    fn path(&self, file: &str) -> String {
        self.directory.join(file).to_str().unwrap().to_owned()
    }

    fn server_key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server.1.serialize_der()))
    }

    /// The receiver's rustls settings: its certificate, and client certificates of this
    /// authority required when `mutual`.
    fn rustls(&self, mutual: bool) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if mutual {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(self.authority.der().clone()).unwrap();
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        Arc::new(
            builder
                .with_single_cert(vec![self.server.0.der().clone()], self.server_key())
                .unwrap(),
        )
    }

    /// tonic's server identity (PEM) and the authority its clients must come from.
    fn tonic(&self, mutual: bool) -> tonic::transport::ServerTlsConfig {
        let tls = tonic::transport::ServerTlsConfig::new().identity(
            tonic::transport::Identity::from_pem(
                self.server.0.pem(),
                self.server.1.serialize_pem(),
            ),
        );
        if mutual {
            tls.client_ca_root(tonic::transport::Certificate::from_pem(
                self.authority.pem(),
            ))
        } else {
            tls
        }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(
        DnType::CommonName,
        format!("clawsmith test authority {name}"),
    );
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

fn leaf(
    authority: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (rcgen::Certificate, KeyPair) {
    let mut params = CertificateParams::new(
        names
            .iter()
            .map(|name| (*name).to_owned())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "clawsmith test");
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let certificate = params.signed_by(&key, authority).unwrap();
    (certificate, key)
}

fn config(pairs: &[(&str, String)]) -> OtlpConfig {
    OtlpConfig::from_env(|name| {
        pairs
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.clone())
    })
    .unwrap()
    .unwrap()
}

/// One span through a tracer of `config`, and the tally once flushed (bounded).
fn export_one(config: &OtlpConfig, name: &str) -> ExportTally {
    let tracer: Tracer = install(config).unwrap();
    let mut span = tracer.start(None, || semconv::execute_tool_span_name(name));
    span.set_attribute(semconv::GEN_AI_TOOL_NAME, name.to_owned());
    span.end();
    tracer.finish(Duration::from_secs(10)).unwrap()
}

fn names(requests: &[receiver::Request]) -> Vec<String> {
    receiver::decode_protobuf(requests)
        .spans
        .into_iter()
        .map(|span| span.name)
        .collect()
}

#[test]
fn spans_reach_an_https_collector_only_when_its_authority_is_trusted() {
    let pki = Pki::new("https");
    let receiver = Receiver::start_tls(pki.rustls(false));
    for protocol in ["http/protobuf", "http/json"] {
        let trusted = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.https_url()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.to_owned()),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.pem")),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=s3cret".to_owned()),
        ]);
        let tally = export_one(&trusted, "read_file");
        assert_eq!((tally.finished, tally.exported), (1, 1), "{protocol}");
        let requests = receiver.requests();
        assert_eq!(requests.len(), 1, "{protocol}");
        assert_eq!(requests[0].path, "/v1/traces");
        assert_eq!(requests[0].header("x-api-key").as_deref(), Some("s3cret"));
        if protocol == "http/protobuf" {
            assert_eq!(names(&requests), ["execute_tool read_file"]);
        } else {
            let body: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
            assert_eq!(
                body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"],
                "execute_tool read_file"
            );
        }
    }
    // The webpki roots alone do not know this authority: the handshake fails, the span is lost
    // and counted so, and nothing reaches the collector.
    let untrusted = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.https_url())]);
    let tally = export_one(&untrusted, "read_file");
    assert_eq!((tally.finished, tally.exported, tally.lost()), (1, 0, 1));
    // Another authority's certificate does not make this server trusted either.
    let other = Pki::new("other");
    let wrong = config(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.https_url()),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", other.path("ca.pem")),
    ]);
    let tally = export_one(&wrong, "read_file");
    assert_eq!((tally.finished, tally.exported, tally.lost()), (1, 0, 1));
    assert!(receiver.requests().is_empty());
}

#[test]
fn a_collector_that_asks_for_a_client_certificate_gets_the_configured_one() {
    let pki = Pki::new("mutual");
    let receiver = Receiver::start_tls(pki.rustls(true));
    let with_identity = config(&[
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            format!("{}/v1/traces", receiver.https_url()),
        ),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.pem")),
        (
            "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
            pki.path("client.pem"),
        ),
        ("OTEL_EXPORTER_OTLP_CLIENT_KEY", pki.path("client.key")),
    ]);
    let tally = export_one(&with_identity, "run_command");
    assert_eq!((tally.finished, tally.exported), (1, 1));
    assert_eq!(names(&receiver.requests()), ["execute_tool run_command"]);
    let without = config(&[
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            format!("{}/v1/traces", receiver.https_url()),
        ),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.pem")),
    ]);
    let tally = export_one(&without, "run_command");
    assert_eq!((tally.finished, tally.exported, tally.lost()), (1, 0, 1));
    assert!(receiver.requests().is_empty());
}

#[test]
fn spans_reach_a_grpc_collector_over_tls_with_and_without_client_certificates() {
    let pki = Pki::new("grpc");
    for mutual in [false, true] {
        let receiver = GrpcReceiver::start_tls(pki.tonic(mutual));
        let url = receiver.url().replacen("http://", "https://", 1);
        let mut pairs = vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", url.clone()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc".to_owned()),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.pem")),
        ];
        if mutual {
            pairs.push((
                "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                pki.path("client.pem"),
            ));
            pairs.push(("OTEL_EXPORTER_OTLP_CLIENT_KEY", pki.path("client.key")));
        }
        let tally = export_one(&config(&pairs), "glob_files");
        assert_eq!((tally.finished, tally.exported), (1, 1), "mutual: {mutual}");
        assert_eq!(
            receiver.span_names(),
            ["execute_tool glob_files"],
            "mutual: {mutual}"
        );
        // Without the authority, or (when asked for) without a client certificate: lost.
        let refused = if mutual {
            config(&pairs[..3])
        } else {
            config(&pairs[..2])
        };
        let tally = export_one(&refused, "glob_files");
        assert_eq!(
            (tally.finished, tally.exported, tally.lost()),
            (1, 0, 1),
            "mutual: {mutual}"
        );
        assert!(receiver.exports().is_empty(), "mutual: {mutual}");
    }
}
