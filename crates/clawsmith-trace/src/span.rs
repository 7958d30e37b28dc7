//! The span recorder the core calls: a [`Tracer`] handle, [`Span`]s that record into plain data,
//! and a [`SpanSink`] that receives each [`FinishedSpan`] when the span ends.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::context::{SpanId, TraceFlags, TraceId, TraceParent, TraceState};

/// Where finished spans go: an exporter (OTLP), a test's collector. `export` must not block on
/// the network: an exporter queues and drops (and counts what it dropped) when it falls behind.
pub trait SpanSink: Send + Sync + fmt::Debug {
    /// Takes one finished span.
    fn export(&self, span: FinishedSpan);
    /// Sends what is queued and waits for it (bounded by the sink's own timeout).
    fn flush(&self) {}
    /// The last flush, when the process ends (`call`, `turn`, `run`, `mcp`): sends what is
    /// queued and waits at most `bound` for the collector, then reports how many spans got
    /// through. What is still in flight after `bound` is abandoned.
    fn finish(&self, bound: Duration) -> ExportTally {
        let _ = bound;
        self.flush();
        ExportTally::default()
    }
}

/// How many finished spans a sink took, and how many of them a collector acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExportTally {
    /// Spans handed to the sink.
    pub finished: u64,
    /// Spans the collector accepted.
    pub exported: u64,
}

impl ExportTally {
    /// Spans that did not reach the collector: dropped from a full queue, refused, or still in
    /// flight when the wait ended.
    pub fn lost(&self) -> u64 {
        self.finished.saturating_sub(self.exported)
    }
}

/// The identity of a span as the next hop sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanContext {
    /// The trace.
    pub trace_id: TraceId,
    /// The span.
    pub span_id: SpanId,
    /// Sampled or not.
    pub flags: TraceFlags,
    /// Vendor state passed along unchanged.
    pub trace_state: Option<TraceState>,
}

impl SpanContext {
    /// The context an incoming `traceparent` (and `tracestate`) names.
    pub fn from_parent(parent: TraceParent, trace_state: Option<TraceState>) -> SpanContext {
        SpanContext {
            trace_id: parent.trace_id,
            span_id: parent.parent_id,
            flags: parent.flags,
            trace_state,
        }
    }

    /// The `traceparent` a child of this span is given.
    pub fn traceparent(&self) -> TraceParent {
        TraceParent {
            trace_id: self.trace_id,
            parent_id: self.span_id,
            flags: self.flags,
        }
    }
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum AttributeValue {
    /// Text.
    String(Cow<'static, str>),
    /// A flag.
    Bool(bool),
    /// An integer.
    Int(i64),
}

impl From<&'static str> for AttributeValue {
    fn from(value: &'static str) -> Self {
        AttributeValue::String(Cow::Borrowed(value))
    }
}

impl From<String> for AttributeValue {
    fn from(value: String) -> Self {
        AttributeValue::String(Cow::Owned(value))
    }
}

impl From<bool> for AttributeValue {
    fn from(value: bool) -> Self {
        AttributeValue::Bool(value)
    }
}

impl From<i64> for AttributeValue {
    fn from(value: i64) -> Self {
        AttributeValue::Int(value)
    }
}

/// One `(key, value)` pair; keys are the [`semconv`](crate::semconv) constants.
pub type Attribute = (&'static str, AttributeValue);

/// A timestamped event inside a span (validation, hook, permission).
#[derive(Debug, Clone, PartialEq)]
pub struct SpanEvent {
    /// The event name.
    pub name: &'static str,
    /// When it happened.
    pub time: SystemTime,
    /// Its attributes.
    pub attributes: Vec<Attribute>,
}

/// How the span ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SpanStatus {
    /// Not set: the normal case.
    #[default]
    Unset,
    /// Failed, with a description.
    Error(String),
}

/// What a sink receives: everything the span recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedSpan {
    /// Span name.
    pub name: String,
    /// Its trace and span id, flags and trace state.
    pub context: SpanContext,
    /// The parent span, if any (in this process or the caller's).
    pub parent_span_id: Option<SpanId>,
    /// Start time.
    pub start: SystemTime,
    /// End time.
    pub end: SystemTime,
    /// Attributes in the order they were set (a later value for a key replaces the earlier).
    pub attributes: Vec<Attribute>,
    /// Events in order.
    pub events: Vec<SpanEvent>,
    /// Status.
    pub status: SpanStatus,
}

/// The handle the core keeps: no sink (the default) records nothing and costs one branch per
/// span; cloning is an `Arc` clone.
#[derive(Clone, Default)]
pub struct Tracer {
    sink: Option<Arc<dyn SpanSink>>,
}

impl fmt::Debug for Tracer {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Tracer")
            .field("enabled", &self.is_enabled())
            .finish()
    }
}

impl Tracer {
    /// Records nothing.
    pub fn noop() -> Tracer {
        Tracer { sink: None }
    }

    /// Records into `sink`.
    pub fn new(sink: Arc<dyn SpanSink>) -> Tracer {
        Tracer { sink: Some(sink) }
    }

    /// Whether spans are recorded.
    pub fn is_enabled(&self) -> bool {
        self.sink.is_some()
    }

    /// Starts a span, child of `parent` (or the root of a new trace). `name` is only computed
    /// when the span records.
    ///
    /// Without a sink, the span records nothing, and its context is `parent`'s unchanged, so
    /// an incoming `traceparent` still reaches commands and MCP servers (the W3C rule for a
    /// participant that does not trace). A parent that is not sampled gives a span with a fresh
    /// id that is not recorded either.
    pub fn start(&self, parent: Option<&SpanContext>, name: impl FnOnce() -> String) -> Span {
        let Some(sink) = &self.sink else {
            return Span {
                context: parent.cloned(),
                recording: None,
            };
        };
        let context = SpanContext {
            trace_id: parent.map_or_else(TraceId::random, |parent| parent.trace_id),
            span_id: SpanId::random(),
            flags: parent.map_or(TraceFlags::SAMPLED, |parent| parent.flags),
            trace_state: parent.and_then(|parent| parent.trace_state.clone()),
        };
        if !context.flags.is_sampled() {
            return Span {
                context: Some(context),
                recording: None,
            };
        }
        let now = SystemTime::now();
        let data = FinishedSpan {
            name: name(),
            context: context.clone(),
            parent_span_id: parent.map(|parent| parent.span_id),
            start: now,
            end: now,
            attributes: Vec::new(),
            events: Vec::new(),
            status: SpanStatus::Unset,
        };
        Span {
            context: Some(context),
            recording: Some(Box::new(Recording {
                sink: Arc::clone(sink),
                data,
            })),
        }
    }

    /// Flushes the sink (see [`SpanSink::flush`]); nothing without one.
    pub fn flush(&self) {
        if let Some(sink) = &self.sink {
            sink.flush();
        }
    }

    /// The final flush (see [`SpanSink::finish`]); `None` without a sink.
    pub fn finish(&self, bound: Duration) -> Option<ExportTally> {
        self.sink.as_ref().map(|sink| sink.finish(bound))
    }
}

struct Recording {
    sink: Arc<dyn SpanSink>,
    data: FinishedSpan,
}

/// A span being recorded. It ends when [`Span::end`] is called or when it is dropped, so a
/// call that returns early (a refusal) still closes its span.
pub struct Span {
    context: Option<SpanContext>,
    recording: Option<Box<Recording>>,
}

impl fmt::Debug for Span {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Span")
            .field("context", &self.context)
            .field("recording", &self.recording.is_some())
            .finish()
    }
}

impl Span {
    /// A span that records nothing and has no context.
    pub fn none() -> Span {
        Span {
            context: None,
            recording: None,
        }
    }

    /// The span's context (to parent children and propagate), if there is a trace.
    pub fn context(&self) -> Option<&SpanContext> {
        self.context.as_ref()
    }

    /// Whether attributes and events are kept: callers skip building costly values otherwise.
    pub fn is_recording(&self) -> bool {
        self.recording.is_some()
    }

    /// Sets an attribute (replacing an earlier value of the same key).
    pub fn set_attribute(&mut self, key: &'static str, value: impl Into<AttributeValue>) {
        if let Some(recording) = &mut self.recording {
            let value = value.into();
            match recording
                .data
                .attributes
                .iter_mut()
                .find(|(existing, _)| *existing == key)
            {
                Some(slot) => slot.1 = value,
                None => recording.data.attributes.push((key, value)),
            }
        }
    }

    /// Adds an event now.
    pub fn add_event(&mut self, name: &'static str, attributes: Vec<Attribute>) {
        if let Some(recording) = &mut self.recording {
            recording.data.events.push(SpanEvent {
                name,
                time: SystemTime::now(),
                attributes,
            });
        }
    }

    /// Marks the span failed.
    pub fn set_error(&mut self, description: impl Into<String>) {
        if let Some(recording) = &mut self.recording {
            recording.data.status = SpanStatus::Error(description.into());
        }
    }

    /// Ends the span now and hands it to the sink.
    pub fn end(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        if let Some(recording) = self.recording.take() {
            let Recording { sink, mut data } = *recording;
            data.end = SystemTime::now();
            sink.export(data);
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A sink that keeps every span in memory: for tests of crates that record spans.
#[derive(Debug, Default)]
pub struct MemorySink {
    spans: std::sync::Mutex<Vec<FinishedSpan>>,
}

impl MemorySink {
    /// The spans finished so far, in the order they ended.
    pub fn spans(&self) -> Vec<FinishedSpan> {
        self.spans
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl SpanSink for MemorySink {
    fn export(&self, span: FinishedSpan) {
        self.spans
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(span);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::semconv;

    fn parent() -> SpanContext {
        let parent =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        SpanContext::from_parent(parent, Some(TraceState::parse("rojo=1").unwrap()))
    }

    #[test]
    fn a_noop_tracer_forwards_the_parent_and_records_nothing() {
        let tracer = Tracer::noop();
        let mut named = false;
        let span = tracer.start(Some(&parent()), || {
            named = true;
            "x".to_owned()
        });
        assert!(!named, "the name is not built without a sink");
        assert!(!span.is_recording());
        assert_eq!(span.context(), Some(&parent()));
        assert!(tracer.start(None, String::new).context().is_none());
    }

    #[test]
    fn spans_record_attributes_events_and_parents() {
        let sink = Arc::new(MemorySink::default());
        let tracer = Tracer::new(sink.clone());
        let mut turn = tracer.start(Some(&parent()), || semconv::TURN_SPAN.to_owned());
        turn.set_attribute(semconv::CLAWSMITH_TURN_ID, "turn_1".to_owned());
        let mut call = tracer.start(turn.context(), || {
            semconv::execute_tool_span_name("read_file")
        });
        call.set_attribute(semconv::CLAWSMITH_STATUS, "success");
        call.set_attribute(semconv::CLAWSMITH_STATUS, "denied");
        call.add_event(semconv::EVENT_PERMISSION, vec![("decision", "deny".into())]);
        call.set_error("permission_denied");
        let call_context = call.context().cloned().unwrap();
        drop(call);
        let turn_context = turn.context().cloned().unwrap();
        turn.end();
        let spans = sink.spans();
        assert_eq!(spans.len(), 2);
        let (call, turn) = (&spans[0], &spans[1]);
        assert_eq!(call.name, "execute_tool read_file");
        assert_eq!(
            call.attributes,
            vec![(semconv::CLAWSMITH_STATUS, "denied".into())]
        );
        assert_eq!(call.events[0].name, semconv::EVENT_PERMISSION);
        assert_eq!(
            call.status,
            SpanStatus::Error("permission_denied".to_owned())
        );
        assert_eq!(call.parent_span_id, Some(turn_context.span_id));
        assert_eq!(call.context, call_context);
        assert_eq!(turn.parent_span_id, Some(parent().span_id));
        assert_eq!(turn.context.trace_id, parent().trace_id);
        assert_eq!(call.context.trace_id, parent().trace_id);
        assert_eq!(
            call.context.trace_state,
            parent().trace_state,
            "tracestate is passed along"
        );
        assert_ne!(turn.context.span_id, parent().span_id);
    }

    #[test]
    fn an_unsampled_parent_is_propagated_but_not_recorded() {
        let sink = Arc::new(MemorySink::default());
        let tracer = Tracer::new(sink.clone());
        let mut unsampled = parent();
        unsampled.flags = TraceFlags(0);
        let span = tracer.start(Some(&unsampled), || "x".to_owned());
        assert!(!span.is_recording());
        let context = span.context().cloned().unwrap();
        assert_eq!(context.trace_id, unsampled.trace_id);
        assert_ne!(context.span_id, unsampled.span_id);
        assert_eq!(
            context.traceparent().to_string().split('-').nth(3),
            Some("00")
        );
        drop(span);
        assert!(sink.spans().is_empty());
    }

    #[test]
    fn a_root_span_starts_a_sampled_trace() {
        let sink = Arc::new(MemorySink::default());
        let span = Tracer::new(sink.clone()).start(None, || "root".to_owned());
        let traceparent = span.context().unwrap().traceparent().to_string();
        assert!(TraceParent::parse(&traceparent).unwrap().flags.is_sampled());
        drop(span);
        assert_eq!(sink.spans()[0].parent_span_id, None);
    }
}
