//! The HTTP exchange shared by both protocols: headers, retries with backoff, streams, and
//! keeping the API key out of everything that leaves this module.

use std::time::Duration;

use serde_json::Value;

use crate::config::{MAX_BACKOFF, ProviderConfig, ProviderKind};
use crate::error::ProviderError;
use crate::provider::{AssistantReply, Provider, ProviderFuture, ProviderRequest, TextSink};
use crate::wire::{self, StreamAccumulator};

/// The most of an answer's body read into memory (16 MiB).
const MAX_BODY_BYTES: usize = 16 << 20;

/// A provider over HTTP(S): OpenAI-compatible Chat Completions or Anthropic Messages.
pub struct HttpProvider {
    config: ProviderConfig,
    /// Read once from the configured variable; never printed (no `Debug` of it), scrubbed from
    /// every error and answer text before they leave this module, and known to the secret
    /// detector (masked in what is stored, by its token rule).
    api_key: Option<String>,
    client: reqwest::Client,
}

impl std::fmt::Debug for HttpProvider {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("HttpProvider")
            .field("kind", &self.config.kind)
            .field("base_url", &self.config.base_url)
            .field("model", &self.config.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .finish()
    }
}

/// One failed attempt.
enum Failure {
    /// Worth another attempt, after `retry_after` when the server said so.
    Retry {
        message: String,
        retry_after: Option<Duration>,
    },
    /// Not worth retrying.
    Fatal(ProviderError),
}

impl HttpProvider {
    /// A provider for `config`, its key read from `config.api_key_env` now.
    pub fn new(config: ProviderConfig) -> Result<HttpProvider, ProviderError> {
        let api_key = match &config.api_key_env {
            Some(variable) => Some(clawsmith_core::sandbox::credential(variable).ok_or_else(
                || ProviderError::MissingApiKey {
                    variable: variable.clone(),
                },
            )?),
            None => None,
        };
        HttpProvider::with_api_key(config, api_key)
    }

    /// A provider with the key given directly (hosts that hold it elsewhere, tests).
    pub fn with_api_key(
        config: ProviderConfig,
        api_key: Option<String>,
    ) -> Result<HttpProvider, ProviderError> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .timeout(Duration::from_secs(config.request_timeout_secs))
            .build()
            .map_err(|error| ProviderError::Client(error.to_string()))?;
        if let Some(key) = &api_key {
            clawsmith_protocol::redact::mask_known_secret(key);
        }
        Ok(HttpProvider {
            config,
            api_key,
            client,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// Masks the key (known to the detector since [`HttpProvider::with_api_key`]) and anything
    /// shaped like a secret.
    fn scrub(&self, text: &str) -> String {
        clawsmith_core::redact_text(text)
    }

    /// A reply with the key masked in its text (shown as the answer, stored). Its calls'
    /// arguments are left as the model wrote them: they are executed, and masking them would
    /// change what runs (`box.txt` written as `bo[REDACTED].txt` with the key `x`); the store
    /// masks them by the detector's token rule.
    fn scrub_reply(&self, mut reply: AssistantReply) -> AssistantReply {
        if let Some(key) = self.api_key.as_deref()
            && let Some(masked) = clawsmith_protocol::redact::mask_secret_value(&reply.text, key)
        {
            reply.text = masked;
        }
        reply
    }

    fn url(&self) -> String {
        format!(
            "{}/{}",
            self.config.base_url.trim().trim_end_matches('/'),
            wire::endpoint(self.config.kind)
        )
    }

    async fn send(
        &self,
        request: &ProviderRequest,
        stream: Option<&dyn TextSink>,
    ) -> Result<AssistantReply, ProviderError> {
        let body = wire::body(&self.config, request, stream.is_some()).to_string();
        let url = self.url();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let failure = match self.attempt(&url, &body, request, stream).await {
                Ok(reply) => return Ok(self.scrub_reply(reply)),
                Err(Failure::Fatal(error)) => return Err(error),
                Err(failure) => failure,
            };
            let Failure::Retry {
                message,
                retry_after,
            } = failure
            else {
                continue;
            };
            if attempts > self.config.max_retries {
                return Err(ProviderError::Exhausted {
                    provider: self.describe(),
                    attempts,
                    last: self.scrub(&message),
                });
            }
            let backoff = Duration::from_millis(
                self.config
                    .retry_base_ms
                    .saturating_mul(1 << (attempts - 1).min(16)),
            );
            tokio::time::sleep(retry_after.unwrap_or(backoff).min(MAX_BACKOFF)).await;
        }
    }

    async fn attempt(
        &self,
        url: &str,
        body: &str,
        request: &ProviderRequest,
        stream: Option<&dyn TextSink>,
    ) -> Result<AssistantReply, Failure> {
        let mut builder = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header("x-request-id", &request.request_id)
            .body(body.to_owned());
        // W3C trace context: a traced model server continues the loop's trace.
        if let Some(traceparent) = &request.traceparent {
            builder = builder.header("traceparent", traceparent);
            if let Some(tracestate) = &request.tracestate {
                builder = builder.header("tracestate", tracestate);
            }
        }
        builder = match (self.config.kind, &self.api_key) {
            (ProviderKind::Openai, Some(key)) => builder.bearer_auth(key),
            (ProviderKind::Openai, None) => builder,
            (ProviderKind::Anthropic, key) => {
                let builder = builder.header("anthropic-version", "2023-06-01");
                match key {
                    Some(key) => builder.header("x-api-key", key),
                    None => builder,
                }
            }
        };
        let mut response = builder.send().await.map_err(|error| Failure::Retry {
            message: format!("sending the request: {}", error_chain(&error)),
            retry_after: None,
        })?;
        let status = response.status();
        if status.as_u16() == 429 || status.is_server_error() {
            let retry_after = retry_after(response.headers());
            let text = read_body(&mut response).await.unwrap_or_default();
            return Err(Failure::Retry {
                message: format!("HTTP {}: {}", status.as_u16(), wire::error_message(&text)),
                retry_after,
            });
        }
        if !status.is_success() {
            let text = read_body(&mut response).await.unwrap_or_default();
            return Err(Failure::Fatal(ProviderError::Refused {
                provider: self.describe(),
                status: status.as_u16(),
                message: self.scrub(&wire::error_message(&text)),
            }));
        }
        let event_stream = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        if event_stream {
            return self.read_stream(&mut response, stream).await;
        }
        let text = read_body(&mut response)
            .await
            .map_err(|message| Failure::Retry {
                message,
                retry_after: None,
            })?;
        let value: Value = serde_json::from_str(&text).map_err(|error| {
            Failure::Fatal(self.malformed(format!(
                "the body is not JSON ({error}): {}",
                wire::bounded(&text, 200)
            )))
        })?;
        let reply = wire::parse_answer(self.config.kind, &value)
            .map_err(|message| Failure::Fatal(self.malformed(message)))?;
        // A streaming caller asked for text as it arrives; a server that answered whole still
        // shows it, once.
        if let Some(sink) = stream
            && !reply.text.is_empty()
        {
            sink.text(&reply.text);
        }
        Ok(reply)
    }

    fn malformed(&self, message: String) -> ProviderError {
        ProviderError::Malformed {
            provider: self.describe(),
            message: self.scrub(&message),
        }
    }

    async fn read_stream(
        &self,
        response: &mut reqwest::Response,
        sink: Option<&dyn TextSink>,
    ) -> Result<AssistantReply, Failure> {
        let mut accumulator = StreamAccumulator::new(self.config.kind);
        let mut pending: Vec<u8> = Vec::new();
        let mut total = 0usize;
        loop {
            let chunk = response.chunk().await.map_err(|error| Failure::Retry {
                message: format!("the stream was cut: {}", error_chain(&error)),
                retry_after: None,
            })?;
            let Some(chunk) = chunk else {
                break;
            };
            total += chunk.len();
            if total > MAX_BODY_BYTES {
                return Err(Failure::Fatal(
                    self.malformed(format!("the stream exceeds {MAX_BODY_BYTES} bytes")),
                ));
            }
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|&byte| byte == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                let line = line.trim_end_matches(['\r', '\n']);
                if let Some(payload) = line.strip_prefix("data:") {
                    accumulator
                        .data(payload.trim_start(), sink)
                        .map_err(|message| Failure::Fatal(self.malformed(message)))?;
                }
            }
            if accumulator.finished() {
                break;
            }
        }
        if !accumulator.finished() {
            return Err(Failure::Retry {
                message: "the stream ended before its final event".to_owned(),
                retry_after: None,
            });
        }
        Ok(accumulator.reply())
    }
}

impl Provider for HttpProvider {
    fn describe(&self) -> String {
        format!("{}:{}", self.config.kind.as_str(), self.config.model)
    }

    fn complete<'a>(
        &'a self,
        request: &'a ProviderRequest,
        stream: Option<&'a dyn TextSink>,
    ) -> ProviderFuture<'a> {
        Box::pin(self.send(request, stream))
    }
}

/// `Retry-After` in seconds (the HTTP-date form is not used by model APIs and is ignored).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get("retry-after")?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    value
        .parse::<f64>()
        .ok()
        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
        .map(Duration::from_secs_f64)
}

async fn read_body(response: &mut reqwest::Response) -> Result<String, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| format!("reading the answer: {}", error_chain(&error)))?
    {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_BODY_BYTES {
            return Err(format!("the answer exceeds {MAX_BODY_BYTES} bytes"));
        }
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// An error with its causes (reqwest's own message is only the outermost).
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}
