//! A scripted model provider: a real HTTP/1.1 server on 127.0.0.1 that speaks both protocols
//! (`POST …/chat/completions` and `POST …/messages`) and replays scripted answers, including the
//! failures a real provider produces (429 with `Retry-After`, 5xx, a malformed body, a stream cut
//! before its end).
//!
//! It is part of the library (not only of the tests) so that the CLI's end-to-end tests and
//! people trying `clawsmith run` without a model can use the same server. It records every
//! request (path, headers, JSON body) and counts requests in flight.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The text and tool calls of one scripted assistant message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScriptedReply {
    /// The text.
    pub text: String,
    /// (name, arguments as JSON text).
    pub calls: Vec<(String, String)>,
}

impl ScriptedReply {
    /// A final answer.
    pub fn answer(text: &str) -> ScriptedReply {
        ScriptedReply {
            text: text.to_owned(),
            calls: Vec::new(),
        }
    }

    /// A message calling tools: `[(name, arguments), …]`.
    pub fn calls(calls: &[(&str, &str)]) -> ScriptedReply {
        ScriptedReply {
            text: String::new(),
            calls: calls
                .iter()
                .map(|(name, arguments)| ((*name).to_owned(), (*arguments).to_owned()))
                .collect(),
        }
    }
}

/// One scripted answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Scripted {
    /// 200 with the whole answer as JSON.
    Reply(ScriptedReply),
    /// 200 with the answer as server-sent events (when the request asked to stream; otherwise
    /// answered whole).
    Stream(ScriptedReply),
    /// 200 with the first event of the stream, then the connection closes.
    TruncatedStream(ScriptedReply),
    /// Any status with a body and an optional `Retry-After` (seconds).
    Status {
        /// HTTP status.
        status: u16,
        /// Body text.
        body: String,
        /// `Retry-After` seconds.
        retry_after: Option<u64>,
    },
    /// 200 with a body that is not JSON.
    Malformed,
    /// Waits, then answers with the inner script (to hold requests in flight).
    Delayed(Duration, Box<Scripted>),
}

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Headers, names lowercased.
    pub headers: BTreeMap<String, String>,
    /// The JSON body (`Null` when it was not JSON).
    pub body: Value,
}

impl RecordedRequest {
    /// The names of the tools the request showed (both protocols).
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tool| {
                tool["function"]["name"]
                    .as_str()
                    .or_else(|| tool["name"].as_str())
                    .map(str::to_owned)
            })
            .collect()
    }

    /// The text of every message the request sent, in order (tool results included).
    pub fn message_texts(&self) -> Vec<String> {
        let mut texts = Vec::new();
        for message in self.body["messages"].as_array().into_iter().flatten() {
            match &message["content"] {
                Value::String(text) => texts.push(text.clone()),
                Value::Array(blocks) => {
                    for block in blocks {
                        if let Some(text) = block["text"].as_str().or(block["content"].as_str()) {
                            texts.push(text.to_owned());
                        }
                    }
                }
                _ => {}
            }
        }
        texts
    }
}

/// Decides the answer to each request.
pub type Responder = Arc<dyn Fn(&RecordedRequest) -> Scripted + Send + Sync>;

/// The running server; it stops when dropped.
pub struct ScriptedServer {
    address: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

struct State {
    responder: Responder,
    requests: Mutex<Vec<RecordedRequest>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ScriptedServer {
    /// A server answering with `script` in order; past its end every request gets a 500 that
    /// says so.
    pub async fn queue(script: Vec<Scripted>) -> std::io::Result<ScriptedServer> {
        let queue = Mutex::new(VecDeque::from(script));
        ScriptedServer::start(Arc::new(move |_request: &RecordedRequest| {
            queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop_front()
                .unwrap_or(Scripted::Status {
                    status: 500,
                    body: r#"{"error":{"message":"the script has no more answers"}}"#.to_owned(),
                    retry_after: None,
                })
        }))
        .await
    }

    /// A server asking `responder` for each answer.
    pub async fn start(responder: Responder) -> std::io::Result<ScriptedServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let state = Arc::new(State {
            responder,
            requests: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        });
        let serving = Arc::clone(&state);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = Arc::clone(&serving);
                tokio::spawn(async move {
                    // A client that goes away mid-answer is its own business.
                    let _ = serve(stream, &state).await;
                });
            }
        });
        Ok(ScriptedServer {
            address,
            state,
            task,
        })
    }

    /// `http://127.0.0.1:PORT/v1`: the `base_url` to configure.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The most requests that were being answered at once.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }
}

async fn serve(mut stream: TcpStream, state: &State) -> std::io::Result<()> {
    let Some(request) = read_request(&mut stream).await? else {
        return Ok(());
    };
    state
        .requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(request.clone());
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let mut script = (state.responder)(&request);
    while let Scripted::Delayed(delay, inner) = script {
        tokio::time::sleep(delay).await;
        script = *inner;
    }
    let anthropic = request.path.ends_with("/messages");
    let streaming = request.body["stream"] == true;
    let outcome = answer(&mut stream, script, anthropic, streaming).await;
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    outcome
}

async fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<RecordedRequest>> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break end + 4;
        }
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Ok(None);
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .unwrap_or("/")
        .to_owned();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|value| value.parse().ok())
        .unwrap_or(0);
    while buffer.len() < header_end + length {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let body = serde_json::from_slice(&buffer[header_end..]).unwrap_or(Value::Null);
    Ok(Some(RecordedRequest {
        path,
        headers,
        body,
    }))
}

async fn answer(
    stream: &mut TcpStream,
    script: Scripted,
    anthropic: bool,
    streaming: bool,
) -> std::io::Result<()> {
    match script {
        Scripted::Reply(reply) => {
            let body = whole(&reply, anthropic).to_string();
            respond(stream, 200, "application/json", &body, None).await
        }
        Scripted::Stream(reply) if !streaming => {
            let body = whole(&reply, anthropic).to_string();
            respond(stream, 200, "application/json", &body, None).await
        }
        Scripted::Stream(reply) => {
            let events = stream_events(&reply, anthropic);
            respond(stream, 200, "text/event-stream", &events.concat(), None).await
        }
        Scripted::TruncatedStream(reply) => {
            let events = stream_events(&reply, anthropic);
            let first = events.first().cloned().unwrap_or_default();
            respond(stream, 200, "text/event-stream", &first, None).await
        }
        Scripted::Status {
            status,
            body,
            retry_after,
        } => respond(stream, status, "application/json", &body, retry_after).await,
        Scripted::Malformed => {
            respond(stream, 200, "application/json", "{\"choices\": [", None).await
        }
        Scripted::Delayed(_, inner) => Box::pin(answer(stream, *inner, anthropic, streaming)).await,
    }
}

/// Writes a response and closes the connection (no keep-alive: the body ends at the close for
/// streams, which is also how a cut stream looks).
async fn respond(
    stream: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &str,
    retry_after: Option<u64>,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} Scripted\r\ncontent-type: {content_type}\r\n");
    if content_type != "text/event-stream" {
        head.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    if let Some(seconds) = retry_after {
        head.push_str(&format!("retry-after: {seconds}\r\n"));
    }
    head.push_str("connection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await?;
    stream.shutdown().await
}

/// Call ids are unique over every answer of every server, as real providers' are (the core
/// refuses an id reused within a turn).
static NEXT_CALL: AtomicUsize = AtomicUsize::new(1);

/// The ids of `count` calls of one answer.
fn call_ids(anthropic: bool, count: usize) -> Vec<String> {
    let first = NEXT_CALL.fetch_add(count, Ordering::SeqCst);
    (first..first + count)
        .map(|n| {
            if anthropic {
                format!("toolu_{n:04}")
            } else {
                format!("call_{n:04}")
            }
        })
        .collect()
}

fn whole(reply: &ScriptedReply, anthropic: bool) -> Value {
    let ids = call_ids(anthropic, reply.calls.len());
    if anthropic {
        let mut content = Vec::new();
        if !reply.text.is_empty() {
            content.push(json!({"type": "text", "text": reply.text}));
        }
        for (position, (name, arguments)) in reply.calls.iter().enumerate() {
            let input: Value = serde_json::from_str(arguments).unwrap_or_else(|_| json!({}));
            content.push(json!({
                "type": "tool_use", "id": ids[position], "name": name, "input": input,
            }));
        }
        json!({
            "id": "msg_scripted", "type": "message", "role": "assistant", "content": content,
            "stop_reason": if reply.calls.is_empty() { "end_turn" } else { "tool_use" },
            "usage": {"input_tokens": 11, "output_tokens": 7},
        })
    } else {
        let calls: Vec<Value> = reply
            .calls
            .iter()
            .enumerate()
            .map(|(position, (name, arguments))| {
                json!({
                    "id": ids[position], "type": "function",
                    "function": {"name": name, "arguments": arguments},
                })
            })
            .collect();
        let mut message = json!({"role": "assistant", "content": reply.text});
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        json!({
            "id": "chatcmpl-scripted", "object": "chat.completion",
            "choices": [{
                "index": 0, "message": message,
                "finish_reason": if reply.calls.is_empty() { "stop" } else { "tool_calls" },
            }],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7},
        })
    }
}

/// The answer as SSE frames; text and arguments are split in two deltas each.
fn stream_events(reply: &ScriptedReply, anthropic: bool) -> Vec<String> {
    let halves = |text: &str| {
        let middle = text.floor_char_boundary(text.len() / 2);
        (text[..middle].to_owned(), text[middle..].to_owned())
    };
    let frame = |event: Option<&str>, data: Value| match event {
        Some(event) => format!("event: {event}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    };
    let mut events = Vec::new();
    let ids = call_ids(anthropic, reply.calls.len());
    let (first, second) = halves(&reply.text);
    if anthropic {
        events.push(frame(
            Some("message_start"),
            json!({"type": "message_start", "message": {"id": "msg_scripted", "usage": {"input_tokens": 11}}}),
        ));
        let mut index = 0;
        if !reply.text.is_empty() {
            events.push(frame(Some("content_block_start"), json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})));
            for part in [&first, &second] {
                events.push(frame(Some("content_block_delta"), json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": part}})));
            }
            events.push(frame(
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": 0}),
            ));
            index = 1;
        }
        for (position, (name, arguments)) in reply.calls.iter().enumerate() {
            let block = index + position;
            events.push(frame(Some("content_block_start"), json!({"type": "content_block_start", "index": block, "content_block": {"type": "tool_use", "id": ids[position], "name": name, "input": {}}})));
            let (head, tail) = halves(arguments);
            for part in [head, tail] {
                events.push(frame(Some("content_block_delta"), json!({"type": "content_block_delta", "index": block, "delta": {"type": "input_json_delta", "partial_json": part}})));
            }
            events.push(frame(
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": block}),
            ));
        }
        let stop = if reply.calls.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        };
        events.push(frame(Some("message_delta"), json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 7}})));
        events.push(frame(Some("message_stop"), json!({"type": "message_stop"})));
    } else {
        let chunk = |delta: Value, finish: Value| json!({"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        events.push(frame(
            None,
            chunk(json!({"role": "assistant", "content": first}), Value::Null),
        ));
        events.push(frame(None, chunk(json!({"content": second}), Value::Null)));
        for (position, (name, arguments)) in reply.calls.iter().enumerate() {
            let (head, tail) = halves(arguments);
            events.push(frame(None, chunk(json!({"tool_calls": [{"index": position, "id": ids[position], "type": "function", "function": {"name": name, "arguments": head}}]}), Value::Null)));
            events.push(frame(
                None,
                chunk(
                    json!({"tool_calls": [{"index": position, "function": {"arguments": tail}}]}),
                    Value::Null,
                ),
            ));
        }
        let finish = if reply.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        events.push(frame(None, chunk(json!({}), json!(finish))));
        events.push(frame(None, json!({"id": "chatcmpl-scripted", "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7}})));
        events.push("data: [DONE]\n\n".to_owned());
    }
    events
}
