//! W3C trace context over MCP `_meta` (SEP-414's reserved `traceparent` and
//! `tracestate` keys): read from a client's `tools/call`, written on calls to external servers.

use clawsmith_protocol::TraceHeaders;
use clawsmith_trace::{SpanContext, TraceParent, TraceState};
use rmcp::model::{MetaObject, RequestMetaObject};

/// The caller's span named by a request's `_meta`, the parent of the call's turn. A malformed
/// `traceparent` is ignored (logged at debug), as W3C Trace Context asks of a receiver: the
/// call runs in a trace of its own. A malformed `tracestate` is dropped alone.
pub(crate) fn incoming_parent(meta: &MetaObject) -> Option<SpanContext> {
    let value = meta.get_traceparent()?;
    let parent = match TraceParent::parse(value.trim()) {
        Ok(parent) => parent,
        Err(error) => {
            tracing::debug!(%error, value, "ignoring the request's _meta.traceparent");
            return None;
        }
    };
    let state = meta
        .get_tracestate()
        .and_then(|value| match TraceState::parse(value) {
            Ok(state) => Some(state),
            Err(error) => {
                tracing::debug!(%error, value, "ignoring the request's _meta.tracestate");
                None
            }
        });
    Some(SpanContext::from_parent(parent, state))
}

/// `_meta` carrying the call's span to an external MCP server.
pub(crate) fn outgoing_meta(trace: &TraceHeaders) -> RequestMetaObject {
    let mut meta = RequestMetaObject::new();
    meta.set_traceparent(trace.traceparent.clone());
    if let Some(state) = &trace.tracestate {
        meta.set_tracestate(state.clone());
    }
    meta
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(pairs: &[(&str, &str)]) -> MetaObject {
        let mut meta = MetaObject::new();
        for (key, value) in pairs {
            meta.0.insert((*key).to_owned(), serde_json::json!(value));
        }
        meta
    }

    #[test]
    fn incoming_context_is_read_strictly() {
        const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let read =
            incoming_parent(&meta(&[("traceparent", PARENT), ("tracestate", "rojo=1")])).unwrap();
        assert_eq!(read.traceparent().to_string(), PARENT);
        assert_eq!(read.trace_state.unwrap().to_string(), "rojo=1");
        let bad_state =
            incoming_parent(&meta(&[("traceparent", PARENT), ("tracestate", "=")])).unwrap();
        assert_eq!(bad_state.trace_state, None);
        assert_eq!(incoming_parent(&meta(&[("traceparent", "00-xyz")])), None);
        assert_eq!(incoming_parent(&meta(&[("tracestate", "rojo=1")])), None);
    }

    #[test]
    fn outgoing_meta_names_the_span_and_keeps_the_state() {
        let meta = outgoing_meta(&TraceHeaders {
            traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned(),
            tracestate: Some("rojo=1".to_owned()),
        });
        assert_eq!(
            serde_json::to_value(&meta).unwrap(),
            serde_json::json!({
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "tracestate": "rojo=1",
            })
        );
    }
}
