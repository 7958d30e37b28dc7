//! A minimal OTLP/HTTP receiver: HTTP/1.1 on 127.0.0.1, plain or over TLS (rustls), requests
//! kept for the test to read.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

pub struct Request {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.clone())
    }
}

pub struct Receiver {
    port: u16,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Receiver {
    pub fn start() -> Receiver {
        Receiver::serve(None)
    }

    /// HTTPS: every connection is a TLS server session of `tls` (its certificate, and the
    /// client certificates it requires if any); a failed handshake is a connection dropped.
    pub fn start_tls(tls: Arc<rustls::ServerConfig>) -> Receiver {
        Receiver::serve(Some(tls))
    }

    fn serve(tls: Option<Arc<rustls::ServerConfig>>) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let kept = Arc::clone(&kept);
                let tls = tls.clone();
                std::thread::spawn(move || match tls {
                    None => serve(stream, &kept),
                    Some(tls) => {
                        let Ok(session) = rustls::ServerConnection::new(tls) else {
                            return;
                        };
                        serve(rustls::StreamOwned::new(session, stream), &kept);
                    }
                });
            }
        });
        Receiver { port, requests }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn https_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<Request> {
        std::mem::take(&mut *self.requests.lock().unwrap())
    }
}

fn serve(stream: impl Read + Write, kept: &Mutex<Vec<Request>>) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let mut headers = Vec::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).is_err() {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((key, value)) = header.split_once(':') {
                headers.push((key.trim().to_owned(), value.trim().to_owned()));
            }
        }
        let length: usize = headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case("content-length"))
            .map_or(0, |(_, value)| value.parse().unwrap());
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        kept.lock().unwrap().push(Request {
            path,
            headers,
            body,
        });
        // The request is kept before the answer goes out, so a flush that returned has been seen.
        let response =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        let stream = reader.get_mut();
        if stream
            .write_all(response.as_bytes())
            .and_then(|()| stream.flush())
            .is_err()
        {
            return;
        }
    }
}

pub struct Exported {
    pub resource_attributes: Vec<(String, String)>,
    pub spans: Vec<Span>,
}

impl Exported {
    pub fn resource_attribute(&self, key: &str) -> Option<String> {
        self.resource_attributes
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.clone())
    }
}

pub fn decode_protobuf(requests: &[Request]) -> Exported {
    let mut exported = Exported {
        resource_attributes: Vec::new(),
        spans: Vec::new(),
    };
    for request in requests {
        let decoded = ExportTraceServiceRequest::decode(request.body.as_slice()).unwrap();
        for resource_spans in decoded.resource_spans {
            for attribute in resource_spans
                .resource
                .map(|resource| resource.attributes)
                .unwrap_or_default()
            {
                if let Some(Value::StringValue(text)) =
                    attribute.value.and_then(|value| value.value)
                {
                    exported.resource_attributes.push((attribute.key, text));
                }
            }
            for scope_spans in resource_spans.scope_spans {
                exported.spans.extend(scope_spans.spans);
            }
        }
    }
    exported
}
