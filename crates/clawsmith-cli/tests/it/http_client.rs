//! One HTTP/1.1 exchange over a fresh connection from a plain socket, for the tests of the
//! local servers (`clawsmith web`, `clawsmith mcp --http`): nothing between the test and the
//! bytes on the wire, so every header the test sets (a hostile `Host`, a declared length) is
//! sent as written.

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::Value;

/// An answer: status, header block (lowercase), body (de-chunked).
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: String,
    pub(crate) body: String,
}

impl Reply {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The refusal code of a JSON error body (`{"error": {"code": …}}`); empty when there is
    /// none.
    pub(crate) fn code(&self) -> String {
        serde_json::from_str::<Value>(&self.body).map_or_else(
            |_| String::new(),
            |body| {
                body["error"]["code"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            },
        )
    }

    /// The value of header `name` (lowercase, as the whole block is).
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|line| {
            let (found, value) = line.split_once(':')?;
            (found == name).then(|| value.trim().to_owned())
        })
    }
}

/// Sends `method path` to 127.0.0.1:`port` with `headers` (a `Host` of 127.0.0.1:`port` and the
/// body's `Content-Length` unless given) and `body`; reads the answer until the server closes.
pub(crate) fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let given = |wanted: &str| {
        headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case(wanted))
    };
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\n");
    if !given("host") {
        request.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if !given("content-length") {
        request.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    request.push_str("Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    // A refused request may be answered before its body is read: the answer is what counts.
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split(' ').nth(1).unwrap_or("0").parse().unwrap_or(0);
    let headers = head.to_lowercase();
    let body = if headers.contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut raw: &str) -> String {
    let mut body = String::new();
    while let Some((size, rest)) = raw.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        body.push_str(&rest[..size]);
        raw = rest[size..].strip_prefix("\r\n").unwrap_or(&rest[size..]);
    }
    body
}
