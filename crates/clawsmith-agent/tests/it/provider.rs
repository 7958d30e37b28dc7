//! The providers against the scripted server: both protocols, whole and streamed answers,
//! retries, refusals and the key kept out of errors.

use std::sync::Mutex;

use clawsmith_agent::fixture::{Scripted, ScriptedReply, ScriptedServer};
use clawsmith_agent::{
    HttpProvider, Provider, ProviderConfig, ProviderError, ProviderKind, ProviderRequest, TextSink,
};
use clawsmith_protocol::{ModelMessage, Role};

use crate::support::{KEY, provider};

fn request() -> ProviderRequest {
    ProviderRequest {
        request_id: "req_test".to_owned(),
        system: Some("be brief".to_owned()),
        messages: vec![ModelMessage::text(Role::User, "hello")],
        tools: Vec::new(),
        model: None,
        traceparent: None,
        tracestate: None,
    }
}

#[derive(Default)]
struct Collect(Mutex<String>);

impl TextSink for Collect {
    fn text(&self, delta: &str) {
        self.0.lock().unwrap().push_str(delta);
    }
}

const KINDS: [ProviderKind; 2] = [ProviderKind::Openai, ProviderKind::Anthropic];

#[tokio::test]
async fn whole_and_streamed_answers_in_both_protocols() {
    let reply = ScriptedReply {
        text: "Reading it — now".to_owned(),
        calls: vec![("read_file".to_owned(), r#"{"path":"a.txt"}"#.to_owned())],
    };
    for kind in KINDS {
        for streamed in [false, true] {
            let script = if streamed {
                Scripted::Stream(reply.clone())
            } else {
                Scripted::Reply(reply.clone())
            };
            let server = ScriptedServer::queue(vec![script]).await.unwrap();
            let provider = provider(&server, kind);
            let sink = Collect::default();
            let answer = provider
                .complete(&request(), streamed.then_some(&sink as &dyn TextSink))
                .await
                .unwrap();
            let case = format!("{kind:?} streamed={streamed}");
            assert_eq!(answer.text, reply.text, "{case}");
            assert_eq!(answer.tool_calls.len(), 1, "{case}");
            assert_eq!(answer.tool_calls[0].name, "read_file", "{case}");
            assert_eq!(
                answer.tool_calls[0].arguments, r#"{"path":"a.txt"}"#,
                "{case}"
            );
            assert_eq!(answer.usage.input_tokens, 11, "{case}");
            assert_eq!(answer.usage.output_tokens, 7, "{case}");
            if streamed {
                assert_eq!(*sink.0.lock().unwrap(), reply.text, "{case}");
            }
            let requests = server.requests();
            assert_eq!(requests.len(), 1, "{case}");
            let sent = &requests[0];
            assert_eq!(sent.body["stream"], streamed, "{case}");
            assert_eq!(sent.headers["x-request-id"], "req_test", "{case}");
            match kind {
                ProviderKind::Openai => {
                    assert_eq!(sent.path, "/v1/chat/completions");
                    assert_eq!(sent.headers["authorization"], format!("Bearer {KEY}"));
                    assert_eq!(sent.body["messages"][0]["role"], "system");
                }
                ProviderKind::Anthropic => {
                    assert_eq!(sent.path, "/v1/messages");
                    assert_eq!(sent.headers["x-api-key"], KEY);
                    assert_eq!(sent.headers["anthropic-version"], "2023-06-01");
                    assert_eq!(sent.body["system"], "be brief");
                }
            }
        }
    }
}

#[tokio::test]
async fn retries_429_with_retry_after_then_500_then_answers() {
    let server = ScriptedServer::queue(vec![
        Scripted::Status {
            status: 429,
            body: r#"{"error":{"message":"slow down"}}"#.to_owned(),
            retry_after: Some(1),
        },
        Scripted::Status {
            status: 500,
            body: "oops".to_owned(),
            retry_after: None,
        },
        Scripted::Reply(ScriptedReply::answer("done")),
    ])
    .await
    .unwrap();
    let answer = provider(&server, ProviderKind::Openai)
        .complete(&request(), None)
        .await
        .unwrap();
    assert_eq!(answer.text, "done");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn retries_are_bounded_and_report_the_last_failure() {
    let busy = || Scripted::Status {
        status: 503,
        body: r#"{"error":{"message":"overloaded"}}"#.to_owned(),
        retry_after: None,
    };
    let server = ScriptedServer::queue(vec![busy(), busy(), busy(), busy()])
        .await
        .unwrap();
    let mut config = ProviderConfig::new(ProviderKind::Anthropic, &server.base_url(), "m");
    config.max_retries = 2;
    config.retry_base_ms = 1;
    let provider = HttpProvider::with_api_key(config, None).unwrap();
    let error = provider.complete(&request(), None).await.unwrap_err();
    assert!(
        matches!(&error, ProviderError::Exhausted { attempts: 3, last, .. } if last.contains("HTTP 503: overloaded")),
        "{error}"
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn client_errors_quote_the_provider_and_are_not_retried() {
    for kind in KINDS {
        let server = ScriptedServer::queue(vec![Scripted::Status {
            status: 400,
            body: r#"{"type":"error","error":{"type":"invalid_request_error","message":"model `nope` not found"}}"#.to_owned(),
            retry_after: None,
        }])
        .await
        .unwrap();
        let error = provider(&server, kind)
            .complete(&request(), None)
            .await
            .unwrap_err();
        assert!(
            matches!(&error, ProviderError::Refused { status: 400, message, .. } if message == "model `nope` not found"),
            "{error}"
        );
        assert!(error.to_string().contains("HTTP 400"), "{error}");
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn an_echoed_key_is_redacted_from_errors_and_replies() {
    let server = ScriptedServer::queue(vec![
        Scripted::Status {
            status: 401,
            body: format!(r#"{{"error":{{"message":"invalid key {KEY}"}}}}"#),
            retry_after: None,
        },
        Scripted::Reply(ScriptedReply::answer(&format!("your key is {KEY}"))),
    ])
    .await
    .unwrap();
    let provider = provider(&server, ProviderKind::Openai);
    let error = provider.complete(&request(), None).await.unwrap_err();
    assert!(!error.to_string().contains(KEY), "{error}");
    assert!(error.to_string().contains("[REDACTED]"), "{error}");
    assert!(!format!("{provider:?}").contains(KEY));
    let answer = provider.complete(&request(), None).await.unwrap();
    assert_eq!(answer.text, "your key is [REDACTED]");
}

#[tokio::test]
async fn a_malformed_body_is_an_error_naming_it() {
    let server = ScriptedServer::queue(vec![Scripted::Malformed])
        .await
        .unwrap();
    let error = provider(&server, ProviderKind::Openai)
        .complete(&request(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ProviderError::Malformed { message, .. } if message.contains("not JSON")),
        "{error}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_cut_stream_is_retried() {
    for kind in KINDS {
        let reply = ScriptedReply::answer("complete answer");
        let server = ScriptedServer::queue(vec![
            Scripted::TruncatedStream(reply.clone()),
            Scripted::Stream(reply.clone()),
        ])
        .await
        .unwrap();
        let sink = Collect::default();
        let answer = provider(&server, kind)
            .complete(&request(), Some(&sink))
            .await
            .unwrap();
        assert_eq!(answer.text, "complete answer", "{kind:?}");
        assert_eq!(server.requests().len(), 2, "{kind:?}");
    }
}

#[tokio::test]
async fn connection_failures_are_retried_then_reported() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut config = ProviderConfig::new(
        ProviderKind::Openai,
        &format!("http://127.0.0.1:{port}/v1"),
        "m",
    );
    config.max_retries = 1;
    config.retry_base_ms = 1;
    let error = HttpProvider::with_api_key(config, None)
        .unwrap()
        .complete(&request(), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ProviderError::Exhausted { attempts: 2, last, .. } if last.contains("sending the request")),
        "{error}"
    );
}

#[test]
fn a_missing_key_variable_is_named() {
    let mut config = ProviderConfig::new(ProviderKind::Openai, "http://127.0.0.1:1/v1", "m");
    config.api_key_env = Some("CLAWSMITH_TEST_KEY_THAT_IS_NEVER_SET".to_owned());
    let error = HttpProvider::new(config).unwrap_err();
    assert!(
        matches!(&error, ProviderError::MissingApiKey { variable } if variable == "CLAWSMITH_TEST_KEY_THAT_IS_NEVER_SET"),
        "{error}"
    );
}
