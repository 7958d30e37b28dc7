//! The server's side of the wire: what a client may send, answered per JSON-RPC 2.0 before rmcp
//! sees it, and how many requests may wait for their answers.
//!
//! rmcp ignores unparsable lines, drops oversized ones, answers wrong parameter types with
//! -32601 and accepts any number of `initialize` requests; a client then waits forever or
//! confuses the session. [`inspect`] answers each of those itself (table in the tests).
//! Backpressure: a request takes one of [`MAX_UNANSWERED_REQUESTS`] slots, freed once its
//! answer is written; a request read with no slot free waits for one, and meanwhile nothing more
//! is read, so a client that never reads stdout stalls itself instead of making the server
//! execute and queue every request. Answers and notifications take no slot, so the answer to
//! an elicitation question still gets through while up to that many requests wait; and while
//! such a question is open, a request finding no slot is refused (-32000) rather than parked,
//! since the answer that would free a slot may be behind it.

use std::collections::HashSet;

use clawsmith_protocol::CancellationSignal;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, ErrorCode, InitializeRequestParams,
    JsonRpcMessage, JsonRpcRequest, PaginatedRequestParams, RequestId,
};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use crate::transport::{LineRead, LineReader, LineWriter, RequestSlots, cancelled_request};

/// Longest request line (one JSON-RPC message) `clawsmith mcp` reads; a longer one is answered
/// with -32600 and skipped.
pub const MAX_REQUEST_LINE_BYTES: usize = 4 * 1024 * 1024;
/// Requests read but not answered yet (running, waiting for their turn, or answered but not
/// written because the client is not reading). With all taken, no more requests are read.
pub const MAX_UNANSWERED_REQUESTS: usize = 32;

/// What one line from the client is.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A message for rmcp.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Not acceptable: this error answer goes back (`id` null when none could be read).
    Refuse(Value),
    /// Nothing to do (a blank line, an unknown notification, a stray malformed answer).
    Skip,
}

/// The error answer to a message that broke a rule.
pub(crate) fn refusal(id: Option<&Value>, code: ErrorCode, message: &str) -> Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": {"code": code.0, "message": message},
    })
}

/// A known method's parameters, checked against their type: a mismatch is -32602, never the
/// -32601 rmcp gives when its untagged request enum falls through to "custom request".
type ParamsCheck = fn(Option<&Value>) -> Result<(), String>;

fn typed<T: serde::de::DeserializeOwned>(params: Option<&Value>) -> Result<(), String> {
    // Read from the borrowed value: no copy of the parameters to check them.
    T::deserialize(params.unwrap_or(&Value::Null))
        .map(drop)
        .map_err(|error| error.to_string())
}

fn optional<T: serde::de::DeserializeOwned>(params: Option<&Value>) -> Result<(), String> {
    match params {
        None | Some(Value::Null) => Ok(()),
        Some(_) => typed::<T>(params),
    }
}

const PARAMS_CHECKS: &[(&str, ParamsCheck)] = &[
    ("initialize", typed::<InitializeRequestParams>),
    ("tools/call", typed::<CallToolRequestParams>),
    ("tools/list", optional::<PaginatedRequestParams>),
];

/// Classifies one line (the tests hold the table of cases).
pub(crate) fn inspect(line: &[u8]) -> Inbound {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Inbound::Skip;
    }
    // serde_json stops at 128 levels of nesting with an error: no stack overflow.
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(error) => {
            return Inbound::Refuse(refusal(
                None,
                ErrorCode::PARSE_ERROR,
                &format!("Parse error: {error}"),
            ));
        }
    };
    let object = match &value {
        Value::Object(object) => object,
        Value::Array(_) => {
            return Inbound::Refuse(refusal(
                None,
                ErrorCode::INVALID_REQUEST,
                "Invalid Request: JSON-RPC batches are not supported (MCP removed them); send \
                 one message per line",
            ));
        }
        _ => {
            return Inbound::Refuse(refusal(
                None,
                ErrorCode::INVALID_REQUEST,
                "Invalid Request: a message is a JSON object",
            ));
        }
    };
    let id = object.get("id");
    let valid_id = match id {
        None => true,
        Some(Value::String(_)) => true,
        Some(Value::Number(number)) => number.is_i64(),
        Some(_) => false,
    };
    if !valid_id {
        return Inbound::Refuse(refusal(
            None,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: `id` must be a string or an integer",
        ));
    }
    if object.get("jsonrpc") != Some(&Value::from("2.0")) {
        return Inbound::Refuse(refusal(
            id,
            ErrorCode::INVALID_REQUEST,
            "Invalid Request: `jsonrpc` must be \"2.0\"",
        ));
    }
    let method = match object.get("method") {
        None => None,
        Some(Value::String(method)) => Some(method.as_str()),
        Some(_) => {
            return Inbound::Refuse(refusal(
                id,
                ErrorCode::INVALID_REQUEST,
                "Invalid Request: `method` must be a string",
            ));
        }
    };
    if let Some(call) = tools_call(method, id, object, &value) {
        return Inbound::Message(Box::new(call));
    }
    if let (Some(method), Some(_)) = (method, id)
        && let Some((_, check)) = PARAMS_CHECKS.iter().find(|(name, _)| *name == method)
        && let Err(error) = check(object.get("params"))
    {
        return Inbound::Refuse(refusal(
            id,
            ErrorCode::INVALID_PARAMS,
            &format!("Invalid params for {method}: {error}"),
        ));
    }
    match RxJsonRpcMessage::<RoleServer>::deserialize(&value) {
        Ok(message) => Inbound::Message(Box::new(message)),
        // A request we cannot read is answered; notifications and answers are never answered
        // (an error in reply to a reply invites an echo storm).
        Err(error) if method.is_some() && id.is_some() => Inbound::Refuse(refusal(
            id,
            ErrorCode::INVALID_REQUEST,
            &format!("Invalid Request: {error}"),
        )),
        Err(_) => Inbound::Skip,
    }
}

/// A well-formed `tools/call` request read straight into its type: rmcp's own parse
/// of a message buffers it and tries its untagged request enum variant by variant, ~3% of an MCP
/// `read_file` call's processor time. The same `Request` parse rmcp ends with (`_meta` into the
/// extensions), for the same shape rmcp accepts as a request (`method` and `id`, neither
/// `result` nor `error`); anything it does not read — bad parameters included — is `None`, and
/// takes the general path with its error answers.
fn tools_call(
    method: Option<&str>,
    id: Option<&Value>,
    object: &serde_json::Map<String, Value>,
    value: &Value,
) -> Option<RxJsonRpcMessage<RoleServer>> {
    if method != Some("tools/call") || object.contains_key("result") || object.contains_key("error")
    {
        return None;
    }
    let id = RequestId::deserialize(id?).ok()?;
    let request = CallToolRequest::deserialize(value).ok()?;
    Some(JsonRpcMessage::Request(JsonRpcRequest::new(
        id,
        ClientRequest::CallToolRequest(request),
    )))
}

/// The refusal of a request that found every slot taken while the server waits for the client.
fn busy(request: &RxJsonRpcMessage<RoleServer>) -> Value {
    let id = match request {
        JsonRpcMessage::Request(request) => serde_json::to_value(&request.id).ok(),
        _ => None,
    };
    refusal(
        id.as_ref(),
        SERVER_BUSY,
        &format!(
            "Server busy: {MAX_UNANSWERED_REQUESTS} requests wait for their answers while the \
             server waits for this client's answer to its question; retry after answering it"
        ),
    )
}

/// The server transport: [`inspect`] on every line, one `initialize`, unique ids in flight, and
/// the slots of [`MAX_UNANSWERED_REQUESTS`].
pub(crate) struct ServerTransport<R> {
    reader: LineReader<R>,
    writer: LineWriter,
    requests: RequestSlots<RxJsonRpcMessage<RoleServer>>,
    /// An error answer waiting for room in the write queue.
    refusal: Option<Value>,
    initialized: bool,
    /// Fired when the client closes its end: the running call is cancelled at once instead of
    /// after rmcp's drain of in-flight answers (nobody is left to read them).
    on_eof: CancellationSignal,
    /// Our own requests to the client (elicitation) waiting for its answer. While any waits, a
    /// request finding every slot taken is refused instead of stalling the reading: the answer
    /// that would free a slot may be behind it.
    asking: watch::Sender<HashSet<RequestId>>,
    asking_changes: watch::Receiver<HashSet<RequestId>>,
}

/// JSON-RPC's implementation-defined server error, for a request refused while every slot is
/// taken and the server waits for the client.
const SERVER_BUSY: ErrorCode = ErrorCode(-32000);

impl<R: AsyncRead + Unpin + Send> ServerTransport<R> {
    pub(crate) fn new<W: AsyncWrite + Unpin + Send + 'static>(
        read: R,
        write: W,
        on_eof: CancellationSignal,
    ) -> ServerTransport<R> {
        let (asking, asking_changes) = watch::channel(HashSet::new());
        ServerTransport {
            reader: LineReader::new(read, MAX_REQUEST_LINE_BYTES),
            writer: LineWriter::spawn(write),
            requests: RequestSlots::new(MAX_UNANSWERED_REQUESTS),
            refusal: None,
            initialized: false,
            on_eof,
            asking,
            asking_changes,
        }
    }

    /// The client answered one of our requests: it no longer waits.
    fn answered(&mut self, message: &RxJsonRpcMessage<RoleServer>) {
        let id = match message {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        if let Some(id) = id {
            self.asking.send_modify(|asking| {
                asking.remove(id);
            });
        }
    }

    /// The rules rmcp does not enforce on a well-formed message: `Err` is the error answer.
    fn check(&mut self, message: &RxJsonRpcMessage<RoleServer>) -> Result<(), Value> {
        if let JsonRpcMessage::Request(request) = message {
            let id = serde_json::to_value(&request.id).ok();
            if self.requests.is_unanswered(&request.id) {
                return Err(refusal(
                    id.as_ref(),
                    ErrorCode::INVALID_REQUEST,
                    "Invalid Request: this id is already in use by a request not answered yet",
                ));
            }
            if request.request.method() == "initialize" {
                if self.initialized {
                    return Err(refusal(
                        id.as_ref(),
                        ErrorCode::INVALID_REQUEST,
                        "Invalid Request: the connection is already initialized",
                    ));
                }
                self.initialized = true;
            }
        }
        Ok(())
    }
}

impl<R: AsyncRead + Unpin + Send> Transport<RoleServer> for ServerTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        match &item {
            JsonRpcMessage::Request(request) => {
                let id = request.id.clone();
                self.asking.send_modify(|asking| {
                    asking.insert(id);
                });
            }
            JsonRpcMessage::Notification(notification) => {
                if let Some(id) = cancelled_request(&notification.notification) {
                    self.asking.send_modify(|asking| {
                        asking.remove(&id);
                    });
                }
            }
            _ => {}
        }
        let release = self.requests.release(&item);
        self.writer.send(&item, release)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            // Cancel-safe: the refusal, the parked request and a partial line live in `self`.
            if self.refusal.is_some() {
                let room = self.writer.room().await?;
                if let Some(refusal) = self.refusal.take() {
                    self.writer.send_with(room, &refusal).ok()?;
                }
            }
            if self.requests.is_parked() {
                tokio::select! {
                    request = self.requests.admitted() => return request,
                    _ = self.asking_changes.wait_for(|asking| !asking.is_empty()) => {
                        self.refusal = self.requests.take_parked().map(|request| busy(&request));
                        continue;
                    }
                }
            }
            match self.reader.next().await {
                LineRead::Eof => {
                    self.on_eof.cancel();
                    return None;
                }
                LineRead::Oversized => {
                    self.refusal = Some(refusal(
                        None,
                        ErrorCode::INVALID_REQUEST,
                        &format!(
                            "Invalid Request: message over the {} MiB line cap, discarded",
                            MAX_REQUEST_LINE_BYTES / (1024 * 1024)
                        ),
                    ));
                }
                LineRead::Line => match inspect(self.reader.line()) {
                    Inbound::Skip => {}
                    Inbound::Refuse(answer) => self.refusal = Some(answer),
                    Inbound::Message(message) => match self.check(&message) {
                        Ok(()) => {
                            if let Some(message) = self.requests.admit(message) {
                                self.answered(&message);
                                return Some(message);
                            }
                        }
                        Err(answer) => self.refusal = Some(answer),
                    },
                },
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.close().await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Ok(method or "")` for a message, `Err(code)` for a refusal, `Err(0)` for a skip.
    fn check(line: &str) -> Result<String, i64> {
        match inspect(line.as_bytes()) {
            Inbound::Message(message) => Ok(match *message {
                JsonRpcMessage::Request(request) => request.request.method().to_owned(),
                _ => String::new(),
            }),
            Inbound::Refuse(answer) => Err(answer["error"]["code"].as_i64().unwrap_or(1)),
            Inbound::Skip => Err(0),
        }
    }

    #[test]
    fn each_line_is_a_message_or_an_answer_per_the_spec() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let deep_params = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"x","arguments":{}}}}}"#,
            format_args!("{}1{}", "{\"a\":".repeat(200), "}".repeat(200))
        );
        // (line, expected)
        let table: &[(&str, Result<String, i64>)] = &[
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
                Ok("ping".into()),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":"tools/list"}"#,
                Ok("tools/list".into()),
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a"}}}"#,
                Ok("tools/call".into()),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                Ok(String::new()),
            ),
            ("", Err(0)),
            ("   ", Err(0)),
            ("garbage", Err(-32700)),
            (r#"{"jsonrpc":"2.0","id":1,"#, Err(-32700)),
            (&deep, Err(-32700)),
            (&deep_params, Err(-32700)),
            ("[]", Err(-32600)),
            (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, Err(-32600)),
            ("3", Err(-32600)),
            (r#""ping""#, Err(-32600)),
            (r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, Err(-32600)),
            (r#"{"id":1,"method":"ping"}"#, Err(-32600)),
            (r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#, Err(-32600)),
            (r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, Err(-32600)),
            (r#"{"jsonrpc":"2.0","id":1,"method":7}"#, Err(-32600)),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#,
                Err(-32602),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
                Err(-32602),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
                Err(-32602),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":3}}"#,
                Err(-32602),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
                Err(-32602),
            ),
            // Unknown methods reach rmcp, which answers -32601.
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"no/such"}"#,
                Ok("no/such".into()),
            ),
            // Notifications and stray answers are never answered (rmcp ignores unknown ones).
            (r#"{"jsonrpc":"2.0","method":"no/such"}"#, Ok(String::new())),
            (r#"{"jsonrpc":"2.0","id":9,"result":{}}"#, Ok(String::new())),
            (r#"{"jsonrpc":"2.0","id":9}"#, Err(0)),
        ];
        for (line, expected) in table {
            let shown: String = line.chars().take(80).collect();
            assert_eq!(&check(line), expected, "{shown}");
        }
    }

    #[test]
    fn a_tools_call_read_directly_is_the_message_rmcp_reads() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a"}}}"#,
            r#"{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"read_file"}}"#,
            r#"{"method":"tools/call","params":{"arguments":{"n":[1,2.5,null]},"name":"t","_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","progressToken":7}},"id":9,"jsonrpc":"2.0","extra":true}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","arguments":{},"task":{"ttl":5}}}"#,
        ];
        for line in lines {
            let value: Value = serde_json::from_str(line).unwrap();
            let Value::Object(object) = &value else {
                panic!("{line}")
            };
            let direct = tools_call(Some("tools/call"), object.get("id"), object, &value)
                .unwrap_or_else(|| panic!("read directly: {line}"));
            let by_rmcp = RxJsonRpcMessage::<RoleServer>::deserialize(&value).unwrap();
            assert_eq!(
                serde_json::to_value(&direct).unwrap(),
                serde_json::to_value(&by_rmcp).unwrap(),
                "{line}"
            );
            let JsonRpcMessage::Request(request) = direct else {
                panic!("{line}")
            };
            let JsonRpcMessage::Request(expected) = by_rmcp else {
                panic!("{line}")
            };
            assert_eq!(request.id, expected.id, "{line}");
            assert_eq!(
                rmcp::model::GetExtensions::extensions(&request.request)
                    .get::<rmcp::model::RequestMetaObject>()
                    .is_some(),
                line.contains("_meta"),
                "{line}"
            );
        }
        // What it does not read takes the general path (and its answers).
        let others = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":5}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","result":{},"params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"x"}}"#,
        ];
        for line in others {
            let value: Value = serde_json::from_str(line).unwrap();
            let Value::Object(object) = &value else {
                panic!("{line}")
            };
            let method = object.get("method").and_then(Value::as_str);
            assert!(
                tools_call(method, object.get("id"), object, &value).is_none(),
                "{line}"
            );
        }
        assert_eq!(
            check(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","result":{},"params":{"name":"x"}}"#
            ),
            Err(-32600)
        );
    }

    #[test]
    fn refusals_carry_the_id_when_it_could_be_read() {
        // (line, id of the answer)
        let table = [
            ("garbage", Value::Null),
            ("[]", Value::Null),
            (r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#, Value::Null),
            (
                r#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#,
                Value::from(7),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":5}}"#,
                Value::from("x"),
            ),
        ];
        for (line, id) in table {
            let Inbound::Refuse(answer) = inspect(line.as_bytes()) else {
                panic!("{line} is refused")
            };
            assert_eq!(answer["id"], id, "{line}");
            assert_eq!(answer["jsonrpc"], "2.0", "{line}");
            assert!(answer["error"]["message"].is_string(), "{line}");
        }
    }
}
