//! The timeline of turns for people: `turn --pretty` as it happens, `session show` from the
//! store. Both feed the same [`Timeline`] with [`Event`]s, so a turn reads the same live and
//! afterwards.
//!
//! One row per call (its start time, glyph, tool, summary, status with its code, duration),
//! then the call's display projection rendered by kind (a coloured diff, a command's exit code
//! and sandbox line and output, search hits, text, an artifact, JSON) or, for a refusal, its
//! reason; a closing line per turn counts the calls by status and says how to undo the turn.
//! [`call_result`] is `call`'s readable form of its one result, in the same glyphs and styles.

use std::collections::HashMap;

use clawsmith_protocol::{
    DisplayKind, Event, EventPayload, ToolCompleted, ToolExecutionResult, ToolStatus, status_prefix,
};

use crate::output::{self, Clock, paint, style};

/// Lines of a display body shown under a call (the full result is in `--json`).
const BODY_LINES: usize = 12;
/// Characters of a body line shown.
const LINE_CHARS: usize = 160;
/// Characters of a call's summary shown in its row.
const SUMMARY_CHARS: usize = 60;
/// The tool column is at least this wide; a longer name widens only its own row.
const TOOL_COLUMN: usize = 14;
/// Indentation of the lines under a row (time column + glyph).
const GUTTER: &str = "            │ ";

/// Turns events into lines for people.
pub struct Timeline {
    clock: Clock,
    /// Calls started and not completed yet: (start time, summary, side effect).
    open: HashMap<String, Started>,
    tally: Tally,
    /// The parallel batches of the turn already announced (by index).
    announced: Vec<u32>,
}

struct Started {
    at_ms: u64,
    summary: String,
    side_effect: bool,
}

/// The calls of the turn being shown, by status.
#[derive(Default)]
struct Tally {
    counts: [u64; 5],
    changed_files: bool,
}

impl Timeline {
    /// A timeline with times in `clock`'s zone.
    pub fn new(clock: Clock) -> Timeline {
        Timeline {
            clock,
            open: HashMap::new(),
            tally: Tally::default(),
            announced: Vec::new(),
        }
    }

    /// The lines `event` adds (often none: a start is shown with its completion).
    pub fn event(&mut self, event: &Event) -> String {
        match &event.payload {
            EventPayload::TurnStarted(started) => {
                self.tally = Tally::default();
                self.announced.clear();
                format!(
                    "{} {}  {}\n",
                    paint(style::HEADER, "turn"),
                    paint(style::ID, &started.turn_id),
                    paint(
                        style::DIM,
                        format!(
                            "{} {}",
                            self.clock.clock_time(event.timestamp_ms),
                            self.clock.zone_name()
                        )
                    )
                )
            }
            EventPayload::ModelRequest(_) => String::new(),
            EventPayload::ToolStarted(started) => {
                self.open.insert(
                    started.tool_call_id.clone(),
                    Started {
                        at_ms: event.timestamp_ms,
                        summary: started.summary.clone().unwrap_or_default(),
                        side_effect: started.side_effect,
                    },
                );
                // A batch that runs in parallel is announced once, when its first call starts;
                // its rows follow as the calls finish.
                match started.batch {
                    Some(batch)
                        if batch.parallel
                            && batch.size > 1
                            && !self.announced.contains(&batch.index) =>
                    {
                        self.announced.push(batch.index);
                        format!(
                            "  {}\n",
                            paint(
                                style::DIM,
                                format!(
                                    "⇉ {} calls in parallel (batch {})",
                                    batch.size,
                                    batch.index + 1
                                )
                            )
                        )
                    }
                    _ => String::new(),
                }
            }
            EventPayload::ToolCompleted(completed) => self.completed(event, completed),
            EventPayload::TurnCompleted(completed) => {
                let line = self.closing_line(&completed.turn_id);
                self.tally = Tally::default();
                line
            }
            // clawsmith-agent's loop: why it ended, and a background task's one notice.
            EventPayload::AgentStopped(stopped) => format!(
                "  {} {} after {} request{} · {} in / {} out tokens{}\n",
                paint(style::HEADER, "agent"),
                stopped.stop_reason.replace('_', " "),
                stopped.turns,
                if stopped.turns == 1 { "" } else { "s" },
                stopped.usage.input_tokens,
                stopped.usage.output_tokens,
                stopped
                    .error
                    .as_deref()
                    .map(|error| format!(": {}", paint(style::ERROR, error)))
                    .unwrap_or_default(),
            ),
            EventPayload::BackgroundTaskCompleted(done) => format!(
                "  {} {} {}: {}\n",
                paint(style::HEADER, "background"),
                paint(style::ID, &done.task_id),
                done.state,
                output::clip(
                    &done
                        .answer
                        .as_deref()
                        .or(done.error.as_deref())
                        .unwrap_or("")
                        .replace('\n', " "),
                    100
                ),
            ),
            // An event kind this timeline has no line of its own for: its type, so it is seen.
            other => {
                let kind = serde_json::to_value(other)
                    .ok()
                    .and_then(|value| value["type"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| "event".to_owned());
                format!("  {}\n", paint(style::DIM, kind))
            }
        }
    }

    fn completed(&mut self, event: &Event, completed: &ToolCompleted) -> String {
        let started = self.open.remove(&completed.tool_call_id);
        let status = completed.status;
        self.tally.counts[status_index(status)] += 1;
        if status == ToolStatus::Success && started.as_ref().is_some_and(|s| s.side_effect) {
            self.tally.changed_files = true;
        }
        let (at_ms, summary, duration) = match &started {
            Some(started) => (
                started.at_ms,
                started.summary.as_str(),
                output::duration_ms(event.timestamp_ms.saturating_sub(started.at_ms)),
            ),
            None => (event.timestamp_ms, "", String::new()),
        };
        let mut status_text = status.as_str().to_owned();
        if let Some(code) = &completed.result.code {
            status_text.push(' ');
            status_text.push_str(code.as_str());
        }
        let display = completed.result.display.as_ref();
        let exit = display
            .filter(|display| display.kind == DisplayKind::Command)
            .and_then(|display| field(display, "exit"));
        let mut status_cell = paint(output::status_style(status), &status_text);
        if let Some(exit) = exit {
            let exit_style = if exit == "exit code 0" {
                style::DIM
            } else {
                style::ERROR
            };
            status_cell.push_str(&format!(", {}", paint(exit_style, exit)));
        }
        let duration = if duration.is_empty() {
            String::new()
        } else {
            format!("  {}", paint(style::DIM, duration))
        };
        let mut text = format!(
            "  {}  {} {}  {}  {}{}\n",
            paint(style::DIM, self.clock.clock_time(at_ms)),
            output::glyph(status),
            output::pad(&paint(style::TOOL, &completed.tool_name), TOOL_COLUMN),
            output::pad(&output::clip(summary, SUMMARY_CHARS), SUMMARY_CHARS.min(36)),
            status_cell,
            duration,
        );
        if status == ToolStatus::Success {
            if let Some(display) = display {
                text.push_str(&projection(display, completed, summary));
            }
        } else {
            let reason = completed
                .output
                .strip_prefix(status_prefix(status))
                .unwrap_or(&completed.output);
            let reason = reason.lines().next().unwrap_or_default();
            text.push_str(&gutter_line(&format!(
                "{} {}",
                paint(output::status_style(status), "reason:"),
                output::clip(reason, LINE_CHARS)
            )));
        }
        text
    }

    fn closing_line(&self, turn_id: &str) -> String {
        let total: u64 = self.tally.counts.iter().sum();
        let mut parts = Vec::new();
        for status in STATUSES {
            let count = self.tally.counts[status_index(status)];
            if count > 0 {
                let word = match status {
                    ToolStatus::Success => "ok",
                    other => other.as_str(),
                };
                parts.push(paint(
                    output::status_style(status),
                    format!("{count} {word}"),
                ));
            }
        }
        let mut line = format!("  {} call{}", total, if total == 1 { "" } else { "s" });
        if !parts.is_empty() {
            line.push_str(&format!(": {}", parts.join(", ")));
        }
        if self.tally.changed_files {
            line.push_str(&format!(
                " · undo: {}",
                paint(style::HELP, format!("clawsmith undo files {turn_id}"))
            ));
        }
        line.push('\n');
        line
    }
}

/// `call`'s readable form: a status line (glyph, tool, status with its code, a command's exit),
/// the display's title and facts in one dim line each, then the whole result the model reads
/// (a diff coloured). Unlike a timeline row nothing is cut: a person asked for this one call.
pub fn call_result(tool: &str, result: &ToolExecutionResult) -> String {
    let status = result.status();
    let mut status_text = status.as_str().to_owned();
    if let Some(code) = result.code() {
        status_text.push(' ');
        status_text.push_str(code.as_str());
    }
    let display = result.metadata.display.as_ref();
    if let Some(exit) = display
        .filter(|display| display.kind == DisplayKind::Command)
        .and_then(|display| field(display, "exit"))
    {
        status_text.push_str(&format!(", {exit}"));
    }
    let mut text = format!(
        "{} {}  {}\n",
        output::glyph(status),
        paint(style::TOOL, tool),
        paint(output::status_style(status), status_text)
    );
    let shown = display.filter(|_| status == ToolStatus::Success);
    if let Some(display) = shown {
        if let Some(title) = &display.title {
            text.push_str(&format!("{}\n", paint(style::DIM, title)));
        }
        let facts: Vec<String> = display
            .fields
            .iter()
            .filter(|field| field.label != "exit")
            .map(|field| format!("{} {}", field.label, field.value))
            .collect();
        if !facts.is_empty() {
            let facts = output::clip(&facts.join(" · "), LINE_CHARS);
            text.push_str(&format!("{}\n", paint(style::DIM, facts)));
        }
    }
    let diff = shown.is_some_and(|display| display.kind == DisplayKind::Diff);
    let body = shown
        .and_then(|display| display.body.as_deref())
        .filter(|_| diff)
        .unwrap_or(&result.content);
    for line in body.lines() {
        match diff.then(|| diff_line_style(line)).flatten() {
            Some(style) => text.push_str(&paint(style, line)),
            None => text.push_str(line),
        }
        text.push('\n');
    }
    text
}

const STATUSES: [ToolStatus; 5] = [
    ToolStatus::Success,
    ToolStatus::Error,
    ToolStatus::Denied,
    ToolStatus::Cancelled,
    ToolStatus::Unknown,
];

fn status_index(status: ToolStatus) -> usize {
    match status {
        ToolStatus::Success => 0,
        ToolStatus::Error => 1,
        ToolStatus::Denied => 2,
        ToolStatus::Cancelled => 3,
        ToolStatus::Unknown => 4,
    }
}

fn field<'a>(display: &'a clawsmith_protocol::Display, label: &str) -> Option<&'a str> {
    display
        .fields
        .iter()
        .find(|field| field.label == label)
        .map(|field| field.value.as_str())
}

fn gutter_line(text: &str) -> String {
    format!("{}{text}\n", paint(style::DIM, GUTTER))
}

/// Up to [`BODY_LINES`] lines of `body`, each styled by `style_of`, then `… N more lines`.
fn body_lines(body: &str, style_of: impl Fn(&str) -> Option<anstyle::Style>) -> String {
    let mut text = String::new();
    let total = body.lines().count();
    for line in body.lines().take(BODY_LINES) {
        let clipped = output::clip(line, LINE_CHARS);
        text.push_str(&gutter_line(&match style_of(line) {
            Some(style) => paint(style, clipped),
            None => clipped,
        }));
    }
    if total > BODY_LINES {
        text.push_str(&gutter_line(&paint(
            style::DIM,
            format!("… {} more lines", total - BODY_LINES),
        )));
    }
    text
}

/// The style of one line of a unified diff.
pub fn diff_line_style(line: &str) -> Option<anstyle::Style> {
    if line.starts_with("+++") || line.starts_with("---") {
        Some(style::HEADER)
    } else if line.starts_with('+') {
        Some(style::ADDED)
    } else if line.starts_with('-') {
        Some(style::REMOVED)
    } else if line.starts_with("@@") {
        Some(style::HUNK)
    } else {
        None
    }
}

/// A successful call's display projection, by kind.
fn projection(
    display: &clawsmith_protocol::Display,
    completed: &ToolCompleted,
    summary: &str,
) -> String {
    let body = display.body.as_deref().unwrap_or_default();
    match display.kind {
        DisplayKind::Diff => body_lines(body, diff_line_style),
        DisplayKind::Command => {
            let mut facts = Vec::new();
            for label in ["sandbox", "filesystem", "network", "stopped", "verdict"] {
                if let Some(value) = field(display, label) {
                    facts.push(format!("{label} {value}"));
                }
            }
            let mut text = String::new();
            if !facts.is_empty() {
                let facts = output::clip(&facts.join(" · "), LINE_CHARS);
                text.push_str(&gutter_line(&paint(style::DIM, facts)));
            }
            text.push_str(&body_lines(body, |_| None));
            text
        }
        DisplayKind::Search => {
            let mut text = String::new();
            if let Some(results) = field(display, "results") {
                text.push_str(&gutter_line(&paint(
                    style::DIM,
                    format!("{results} result(s)"),
                )));
            }
            text.push_str(&body_lines(body, |line| {
                line.contains(':').then_some(style::PATH)
            }));
            text
        }
        DisplayKind::Artifact => {
            let artifact = completed.result.artifact.as_ref();
            let id = artifact
                .map(|artifact| artifact.artifact_id.as_str())
                .or_else(|| field(display, "artifact"))
                .unwrap_or("artifact");
            let size = artifact
                .map(|artifact| output::bytes(artifact.bytes))
                .unwrap_or_default();
            gutter_line(&format!("artifact {} {}", paint(style::ID, id), size))
        }
        DisplayKind::Text | DisplayKind::Json => {
            let mut text = String::new();
            // A title that repeats the row's summary says nothing new.
            if let Some(title) = display
                .title
                .as_ref()
                .filter(|title| !title.eq_ignore_ascii_case(summary))
            {
                text.push_str(&gutter_line(&paint(
                    style::DIM,
                    output::clip(title, LINE_CHARS),
                )));
            }
            if display.kind == DisplayKind::Json {
                text.push_str(&body_lines(body, |_| None));
            }
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use clawsmith_protocol::{
        Display, ErrorCode, Risk, ToolExecutionResult, ToolStarted, TurnCompleted, TurnStarted,
    };
    use jiff::tz::TimeZone;

    use super::*;

    /// 2023-11-14 22:13:20 UTC.
    const T0: u64 = 1_700_000_000_000;

    fn event(sequence: u64, at_ms: u64, payload: EventPayload) -> Event {
        Event {
            session_id: "ses_x".into(),
            sequence,
            timestamp_ms: at_ms,
            payload,
        }
    }

    fn started(id: &str, tool: &str, summary: &str, side_effect: bool) -> EventPayload {
        EventPayload::ToolStarted(ToolStarted {
            tool_call_id: id.into(),
            turn_id: "turn_1".into(),
            tool_name: tool.into(),
            risk: Risk::Read,
            capabilities: Vec::new(),
            side_effect,
            summary: Some(summary.into()),
            tool_schema: None,
            batch: None,
            trace_id: None,
            span_id: None,
        })
    }

    fn completed(id: &str, tool: &str, result: &ToolExecutionResult) -> EventPayload {
        EventPayload::ToolCompleted(ToolCompleted::new(id, "turn_1", tool, result))
    }

    /// The timeline of `events` without styles.
    fn check(events: &[Event]) -> String {
        let mut timeline = Timeline::new(Clock::fixed(T0, TimeZone::UTC));
        let text: String = events.iter().map(|e| timeline.event(e)).collect();
        anstream::adapter::strip_str(&text).to_string()
    }

    #[test]
    fn a_turn_reads_as_rows_projections_reasons_and_a_closing_line() {
        let diff = ToolExecutionResult::success("Edited a.txt").with_display(
            Display::new(clawsmith_protocol::DisplayKind::Diff)
                .with_title("edit a.txt")
                .with_body("@@ -1 +1 @@\n-old\n+new"),
        );
        let command = ToolExecutionResult::success("boom\n[exit code 2]").with_display(
            Display::new(clawsmith_protocol::DisplayKind::Command)
                .with_body("boom")
                .with_field("exit", "exit code 2")
                .with_field("sandbox", "confined"),
        );
        let denied =
            ToolExecutionResult::failure(ErrorCode::PERMISSION_DENIED, "write_file needs approval");
        let events = [
            event(
                1,
                T0,
                EventPayload::TurnStarted(TurnStarted {
                    turn_id: "turn_1".into(),
                }),
            ),
            event(2, T0, started("c1", "edit_file", "Edit a.txt", true)),
            event(3, T0 + 12, completed("c1", "edit_file", &diff)),
            event(4, T0 + 20, started("c2", "run_command", "make", true)),
            event(5, T0 + 1_520, completed("c2", "run_command", &command)),
            event(6, T0 + 1_600, completed("c3", "write_file", &denied)),
            event(
                7,
                T0 + 1_700,
                EventPayload::TurnCompleted(TurnCompleted {
                    turn_id: "turn_1".into(),
                    tool_calls: 3,
                }),
            ),
        ];
        let expected = "\
turn turn_1  22:13:20 UTC
  22:13:20  ✓ edit_file       Edit a.txt                            success  12 ms
            │ @@ -1 +1 @@
            │ -old
            │ +new
  22:13:20  ✓ run_command     make                                  success, exit code 2  1.5 s
            │ sandbox confined
            │ boom
  22:13:21  ⊘ write_file                                            denied permission_denied
            │ reason: write_file needs approval
  3 calls: 2 ok, 1 denied · undo: clawsmith undo files turn_1
";
        assert_eq!(check(&events), expected);
    }

    /// A parallel batch is announced once, when its first call starts; a batch of one or a
    /// sequential batch is not.
    #[test]
    fn a_parallel_batch_is_announced_once() {
        let in_batch = |id: &str, index: u32, size: u32, parallel: bool| {
            let EventPayload::ToolStarted(mut started) = started(id, "read_file", id, false) else {
                unreachable!()
            };
            started.batch = Some(clawsmith_protocol::BatchInfo {
                index,
                size,
                parallel,
            });
            EventPayload::ToolStarted(started)
        };
        let ok = ToolExecutionResult::success("x");
        let turn_start = || {
            EventPayload::TurnStarted(TurnStarted {
                turn_id: "turn_1".into(),
            })
        };
        let events = [
            event(1, T0, turn_start()),
            event(2, T0, in_batch("c1", 0, 2, true)),
            event(3, T0, in_batch("c2", 0, 2, true)),
            event(4, T0 + 1, completed("c2", "read_file", &ok)),
            event(5, T0 + 2, completed("c1", "read_file", &ok)),
            event(6, T0 + 3, in_batch("c3", 1, 1, false)),
            event(7, T0 + 4, completed("c3", "read_file", &ok)),
            event(8, T0 + 5, in_batch("c4", 2, 2, false)),
            event(9, T0 + 6, completed("c4", "read_file", &ok)),
            // The next turn announces its own batch 1 again.
            event(10, T0 + 7, turn_start()),
            event(11, T0 + 7, in_batch("c5", 0, 3, true)),
        ];
        let text = check(&events);
        assert_eq!(
            text.matches("⇉ 2 calls in parallel (batch 1)").count(),
            1,
            "{text}"
        );
        assert_eq!(text.matches("⇉").count(), 2, "{text}");
        assert!(text.contains("⇉ 3 calls in parallel (batch 1)"), "{text}");
        let announced = text.find("⇉ 2").unwrap();
        assert!(announced < text.find("c2").unwrap(), "{text}");
    }

    #[test]
    fn a_turn_without_changes_has_no_undo_hint() {
        let read = ToolExecutionResult::success("alpha");
        let events = [
            event(1, T0, started("c1", "read_file", "Read a.txt", false)),
            event(2, T0 + 3, completed("c1", "read_file", &read)),
            event(
                3,
                T0 + 4,
                EventPayload::TurnCompleted(TurnCompleted {
                    turn_id: "turn_1".into(),
                    tool_calls: 1,
                }),
            ),
        ];
        let shown = check(&events);
        assert!(shown.ends_with("  1 call: 1 ok\n"), "{shown}");
    }

    #[test]
    fn an_agents_stop_and_a_background_notice_get_a_line_each() {
        let events = [
            event(
                1,
                T0,
                EventPayload::BackgroundTaskCompleted(
                    clawsmith_protocol::BackgroundTaskCompleted {
                        task_id: "bg_1".into(),
                        state: "completed".into(),
                        child_session_id: Some("ses_child".into()),
                        stop_reason: Some("answered".into()),
                        answer: Some("found 2 files\nin src".into()),
                        error: None,
                    },
                ),
            ),
            event(
                2,
                T0 + 1,
                EventPayload::AgentStopped(clawsmith_protocol::AgentStopped {
                    turn_id: Some("turn_1".into()),
                    stop_reason: "max_turns".into(),
                    turns: 1,
                    usage: clawsmith_protocol::TokenUsage {
                        input_tokens: 10,
                        output_tokens: 3,
                    },
                    error: None,
                }),
            ),
            event(
                3,
                T0 + 2,
                EventPayload::AgentStopped(clawsmith_protocol::AgentStopped {
                    turn_id: Some("turn_2".into()),
                    stop_reason: "error".into(),
                    turns: 2,
                    usage: clawsmith_protocol::TokenUsage::default(),
                    error: Some("openai:m refused the request (HTTP 400)".into()),
                }),
            ),
        ];
        assert_eq!(
            check(&events),
            "  background bg_1 completed: found 2 files in src\n\
             \x20 agent max turns after 1 request · 10 in / 3 out tokens\n\
             \x20 agent error after 2 requests · 0 in / 0 out tokens: openai:m refused the \
             request (HTTP 400)\n"
        );
    }
}
