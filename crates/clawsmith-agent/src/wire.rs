//! The two wire protocols: request bodies, whole answers and streamed answers.
//!
//! Pure functions over `serde_json::Value`; the HTTP exchange is `http.rs`.

use clawsmith_protocol::{Role, ToolCall, ToolStatus};
use serde_json::{Value, json};

use crate::config::{ProviderConfig, ProviderKind};
use crate::provider::{AssistantReply, ProviderRequest, TextSink, Usage};

/// The endpoint under `base_url`.
pub(crate) fn endpoint(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Openai => "chat/completions",
        ProviderKind::Anthropic => "messages",
    }
}

/// The request body.
pub(crate) fn body(config: &ProviderConfig, request: &ProviderRequest, stream: bool) -> Value {
    match config.kind {
        ProviderKind::Openai => openai_body(config, request, stream),
        ProviderKind::Anthropic => anthropic_body(config, request, stream),
    }
}

/// A whole (not streamed) answer.
pub(crate) fn parse_answer(kind: ProviderKind, body: &Value) -> Result<AssistantReply, String> {
    match kind {
        ProviderKind::Openai => openai_answer(body),
        ProviderKind::Anthropic => anthropic_answer(body),
    }
}

/// The provider's own message in an error body (`{"error": {"message": …}}` in both protocols),
/// else the body's text, bounded.
pub(crate) fn error_message(body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|value| {
        let error = value.get("error")?;
        error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| error.as_str().map(str::to_owned))
    });
    let text = from_json.unwrap_or_else(|| body.trim().to_owned());
    if text.is_empty() {
        return "(no message)".to_owned();
    }
    bounded(&text, 500)
}

/// At most `max` bytes of `text` on a char boundary, with `…` when cut.
pub(crate) use clawsmith_protocol::text::clip as bounded;

fn system_text(request: &ProviderRequest) -> Option<String> {
    let mut parts: Vec<&str> = request.system.iter().map(String::as_str).collect();
    parts.extend(
        request
            .messages
            .iter()
            .filter(|message| message.role == Role::System)
            .map(|message| message.content.as_str()),
    );
    (!parts.is_empty()).then(|| parts.join("\n\n"))
}

fn openai_body(config: &ProviderConfig, request: &ProviderRequest, stream: bool) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = system_text(request) {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        match message.role {
            Role::System => {}
            Role::User => messages.push(json!({"role": "user", "content": message.content})),
            Role::Assistant if message.tool_calls.is_empty() => {
                messages.push(json!({"role": "assistant", "content": message.content}));
            }
            Role::Assistant => {
                let calls: Vec<Value> = message
                    .tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        })
                    })
                    .collect();
                let content = if message.content.is_empty() {
                    Value::Null
                } else {
                    Value::String(message.content.clone())
                };
                messages
                    .push(json!({"role": "assistant", "content": content, "tool_calls": calls}));
            }
            Role::Tool => messages.push(json!({
                "role": "tool",
                "tool_call_id": message.tool_call_id.clone().unwrap_or_default(),
                "content": message.content,
            })),
        }
    }
    let mut body = json!({
        "model": request.model.as_deref().unwrap_or(&config.model),
        "messages": messages,
        "max_tokens": config.max_tokens,
        "stream": stream,
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.input_schema,
                    },
                })
            })
            .collect();
    }
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

fn anthropic_body(config: &ProviderConfig, request: &ProviderRequest, stream: bool) -> Value {
    // Anthropic wants strictly alternating user/assistant messages: tool results travel as
    // `tool_result` blocks of a user message, and neighbours of one role are merged.
    let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let (role, blocks) = match message.role {
            Role::System => continue,
            Role::User => (
                "user",
                vec![json!({"type": "text", "text": message.content})],
            ),
            Role::Assistant => {
                let mut blocks = Vec::new();
                if !message.content.is_empty() {
                    blocks.push(json!({"type": "text", "text": message.content}));
                }
                for call in &message.tool_calls {
                    // The API takes an object; malformed arguments (already answered
                    // `invalid_json` by the core) travel as an empty one.
                    let input = serde_json::from_str::<Value>(&call.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    blocks.push(json!({
                        "type": "tool_use", "id": call.id, "name": call.name, "input": input,
                    }));
                }
                ("assistant", blocks)
            }
            Role::Tool => {
                let failed = message
                    .tool_status()
                    .is_some_and(|status| status != ToolStatus::Success);
                (
                    "user",
                    vec![json!({
                        "type": "tool_result",
                        "tool_use_id": message.tool_call_id.clone().unwrap_or_default(),
                        "content": message.content,
                        "is_error": failed,
                    })],
                )
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match messages.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => messages.push((role, blocks)),
        }
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut body = json!({
        "model": request.model.as_deref().unwrap_or(&config.model),
        "max_tokens": config.max_tokens,
        "messages": messages,
        "stream": stream,
    });
    if let Some(system) = system_text(request) {
        body["system"] = Value::String(system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                })
            })
            .collect();
    }
    body
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn u64_at(value: &Value, key: &str) -> u64 {
    value.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn openai_answer(body: &Value) -> Result<AssistantReply, String> {
    let choice = body
        .get("choices")
        .and_then(|choices| choices.get(0))
        .ok_or("no `choices[0]` in the answer")?;
    let message = choice
        .get("message")
        .ok_or("no `choices[0].message` in the answer")?;
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for (position, call) in calls.iter().enumerate() {
            let function = call
                .get("function")
                .ok_or_else(|| format!("tool_calls[{position}] has no `function`"))?;
            let name = function
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("tool_calls[{position}].function has no `name`"))?;
            tool_calls.push(ToolCall {
                id: call
                    .get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("call_{position}"), str::to_owned),
                name: name.to_owned(),
                arguments: text_of(function.get("arguments").unwrap_or(&Value::Null)),
            });
        }
    }
    let usage = body.get("usage").cloned().unwrap_or(Value::Null);
    Ok(AssistantReply {
        text: text_of(message.get("content").unwrap_or(&Value::Null)),
        tool_calls,
        usage: Usage {
            input_tokens: u64_at(&usage, "prompt_tokens"),
            output_tokens: u64_at(&usage, "completion_tokens"),
        },
        stop_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .unwrap_or("stop")
            .to_owned(),
    })
}

fn anthropic_answer(body: &Value) -> Result<AssistantReply, String> {
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or("no `content` array in the answer")?;
    let mut reply = AssistantReply::default();
    for (position, block) in content.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => reply.text.push_str(&text_of(&block["text"])),
            Some("tool_use") => {
                let name = block
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("content[{position}] (tool_use) has no `name`"))?;
                reply.tool_calls.push(ToolCall {
                    id: block
                        .get("id")
                        .and_then(Value::as_str)
                        .map_or_else(|| format!("toolu_{position}"), str::to_owned),
                    name: name.to_owned(),
                    arguments: block
                        .get("input")
                        .map_or_else(|| "{}".to_owned(), Value::to_string),
                });
            }
            // Thinking and other blocks are not part of the answer.
            _ => {}
        }
    }
    let usage = body.get("usage").cloned().unwrap_or(Value::Null);
    reply.usage = Usage {
        input_tokens: u64_at(&usage, "input_tokens"),
        output_tokens: u64_at(&usage, "output_tokens"),
    };
    reply.stop_reason = body
        .get("stop_reason")
        .and_then(Value::as_str)
        .unwrap_or("end_turn")
        .to_owned();
    Ok(reply)
}

/// Builds a reply from the `data:` payloads of a server-sent event stream.
pub(crate) struct StreamAccumulator {
    kind: ProviderKind,
    text: String,
    /// (id, name, arguments) by the stream's index.
    calls: Vec<(usize, String, String, String)>,
    usage: Usage,
    stop_reason: Option<String>,
    finished: bool,
}

impl StreamAccumulator {
    pub(crate) fn new(kind: ProviderKind) -> StreamAccumulator {
        StreamAccumulator {
            kind,
            text: String::new(),
            calls: Vec::new(),
            usage: Usage::default(),
            stop_reason: None,
            finished: false,
        }
    }

    /// Whether the stream's final event arrived (`[DONE]` / `message_stop`).
    pub(crate) fn finished(&self) -> bool {
        self.finished
    }

    fn call_at(&mut self, index: usize) -> &mut (usize, String, String, String) {
        let position = match self.calls.iter().position(|call| call.0 == index) {
            Some(position) => position,
            None => {
                self.calls
                    .push((index, String::new(), String::new(), String::new()));
                self.calls.len() - 1
            }
        };
        &mut self.calls[position]
    }

    /// One `data:` payload. `Err` for an error event or a payload that is not JSON.
    pub(crate) fn data(
        &mut self,
        payload: &str,
        sink: Option<&dyn TextSink>,
    ) -> Result<(), String> {
        if self.kind == ProviderKind::Openai && payload.trim() == "[DONE]" {
            self.finished = true;
            return Ok(());
        }
        let event: Value = serde_json::from_str(payload).map_err(|error| {
            format!(
                "stream event is not JSON ({error}): {}",
                bounded(payload, 200)
            )
        })?;
        if let Some(error) = event.get("error") {
            return Err(format!(
                "stream error: {}",
                error_message(&json!({"error": error}).to_string())
            ));
        }
        match self.kind {
            ProviderKind::Openai => self.openai_event(&event, sink),
            ProviderKind::Anthropic => self.anthropic_event(&event, sink),
        }
        Ok(())
    }

    fn openai_event(&mut self, event: &Value, sink: Option<&dyn TextSink>) {
        if let Some(usage) = event.get("usage").filter(|usage| usage.is_object()) {
            self.usage = Usage {
                input_tokens: u64_at(usage, "prompt_tokens"),
                output_tokens: u64_at(usage, "completion_tokens"),
            };
        }
        let Some(choice) = event.get("choices").and_then(|choices| choices.get(0)) else {
            return;
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.stop_reason = Some(reason.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            return;
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.text.push_str(text);
            if let Some(sink) = sink {
                sink.text(text);
            }
        }
        for (position, call) in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .map_or(position, |index| index as usize);
            let entry = self.call_at(index);
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                entry.1 = id.to_owned();
            }
            if let Some(function) = call.get("function") {
                if let Some(name) = function.get("name").and_then(Value::as_str) {
                    entry.2.push_str(name);
                }
                if let Some(arguments) = function.get("arguments").and_then(Value::as_str) {
                    entry.3.push_str(arguments);
                }
            }
        }
    }

    fn anthropic_event(&mut self, event: &Value, sink: Option<&dyn TextSink>) {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
        match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                self.usage.input_tokens = u64_at(&event["message"]["usage"], "input_tokens");
            }
            Some("content_block_start") => {
                let block = &event["content_block"];
                if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                    let entry = self.call_at(index);
                    entry.1 = text_of(&block["id"]);
                    entry.2 = text_of(&block["name"]);
                }
            }
            Some("content_block_delta") => {
                let delta = &event["delta"];
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let text = text_of(&delta["text"]);
                        if let Some(sink) = sink {
                            sink.text(&text);
                        }
                        self.text.push_str(&text);
                    }
                    Some("input_json_delta") => {
                        let part = text_of(&delta["partial_json"]);
                        self.call_at(index).3.push_str(&part);
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(reason) = event["delta"].get("stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(output) = event["usage"].get("output_tokens").and_then(Value::as_u64) {
                    self.usage.output_tokens = output;
                }
            }
            Some("message_stop") => self.finished = true,
            _ => {}
        }
    }

    /// The reply the stream carried.
    pub(crate) fn reply(mut self) -> AssistantReply {
        self.calls.sort_by_key(|call| call.0);
        let prefix = match self.kind {
            ProviderKind::Openai => "call",
            ProviderKind::Anthropic => "toolu",
        };
        AssistantReply {
            text: self.text,
            tool_calls: self
                .calls
                .into_iter()
                .map(|(index, id, name, arguments)| ToolCall {
                    id: if id.is_empty() {
                        format!("{prefix}_{index}")
                    } else {
                        id
                    },
                    name,
                    arguments: if arguments.is_empty() && self.kind == ProviderKind::Anthropic {
                        "{}".to_owned()
                    } else {
                        arguments
                    },
                })
                .collect(),
            usage: self.usage,
            stop_reason: self.stop_reason.unwrap_or_else(|| "stop".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawsmith_protocol::ModelMessage;

    #[test]
    fn error_messages() {
        // (body, message)
        let table = [
            (
                r#"{"error":{"message":"model not found","type":"x"}}"#,
                "model not found",
            ),
            (
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}"#,
                "max_tokens: too big",
            ),
            (r#"{"error":"plain"}"#, "plain"),
            ("Bad Gateway", "Bad Gateway"),
            ("", "(no message)"),
        ];
        for (body, message) in table {
            assert_eq!(error_message(body), message, "{body}");
        }
    }

    #[test]
    fn anthropic_history_alternates() {
        let config = ProviderConfig::new(ProviderKind::Anthropic, "http://x", "m");
        let calls = vec![
            ToolCall {
                id: "a".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"x"}"#.into(),
            },
            ToolCall {
                id: "b".into(),
                name: "list_dir".into(),
                arguments: "not json".into(),
            },
        ];
        let request = ProviderRequest {
            request_id: "r".into(),
            system: Some("sys".into()),
            messages: vec![
                ModelMessage::text(Role::User, "task"),
                ModelMessage::assistant_with_calls("", calls),
                ModelMessage::text(Role::Tool, "one"),
                ModelMessage::text(Role::Tool, "two"),
                ModelMessage::text(Role::User, "more"),
            ],
            tools: Vec::new(),
            model: None,
            traceparent: None,
            tracestate: None,
        };
        let body = anthropic_body(&config, &request, false);
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|message| message["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(body["messages"][1]["content"][1]["input"], json!({}));
        assert_eq!(body["messages"][2]["content"].as_array().unwrap().len(), 3);
        assert_eq!(body["system"], "sys");
    }
}
