//! A6: read-only parallel batches, and every condition that forces a batch to run serially.

use std::sync::Arc;

use clawsmith_core::{
    ApprovalAnswer, ApprovalFuture, ApprovalRequest, Approver, BatchOptions, CoreConfig,
    ExtensionTool, Hook, HookFuture, TurnOptions,
};
use clawsmith_protocol::{BatchInfo, EventPayload, Risk, ToolStatus};
use clawsmith_security::{HookDecision, HookInput, HookVerdict};

use crate::support::*;

const SLOW_MILLIS: u64 = 150;

fn with_slow_reads(config: &mut CoreConfig, timeline: &Timeline, names: &[&str]) {
    for name in names {
        config.extension_tools.push(ExtensionTool {
            source: "test".into(),
            tool: slow_read(name, timeline, SLOW_MILLIS).shared(),
            deferred: false,
        });
    }
}

fn batches(events: &[clawsmith_protocol::Event]) -> Vec<BatchInfo> {
    events
        .iter()
        .filter_map(|event| match &event.payload {
            EventPayload::ToolStarted(started) => started.batch,
            _ => None,
        })
        .collect()
}

fn four_calls() -> Vec<clawsmith_protocol::ToolCall> {
    vec![
        call("c1", "slow_a", r#"{"n": 1}"#),
        call("c2", "slow_b", r#"{"n": 2}"#),
        call("c3", "slow_c", r#"{"n": 3}"#),
        call("c4", "slow_d", r#"{"n": 4}"#),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_slow_reads_overlap_and_keep_call_order() {
    let fixture = Fixture::new();
    let timeline = Timeline::default();
    let core = fixture.core(|config| {
        with_slow_reads(config, &timeline, &["slow_a", "slow_b", "slow_c", "slow_d"]);
    });
    let session = core.open_session(None).unwrap();
    let (results, events) = turn(&session, four_calls()).await;
    assert_eq!(timeline.spans().len(), 4);
    assert!(
        timeline.all_overlap(),
        "the four reads ran at the same time"
    );
    let ids: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3", "c4"]);
    for (_, result) in &results {
        assert_status(result, ToolStatus::Success, None);
    }
    assert_eq!(
        batches(&events),
        vec![
            BatchInfo {
                index: 0,
                size: 4,
                parallel: true
            };
            4
        ]
    );
    // Events: all starts in call order, then all completions in call order.
    let completed_ids: Vec<&str> = completed(&events)
        .iter()
        .map(|c| c.tool_call_id.as_str())
        .collect();
    assert_eq!(started_ids(&events), ["c1", "c2", "c3", "c4"]);
    assert_eq!(completed_ids, ["c1", "c2", "c3", "c4"]);
    // History keeps call order.
    let messages = session.messages().unwrap();
    let answered: Vec<&str> = messages
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    assert_eq!(answered, ["c1", "c2", "c3", "c4"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_is_bounded() {
    let fixture = Fixture::new();
    let timeline = Timeline::default();
    let core = fixture.core(|config| {
        config.max_parallel = 1;
        with_slow_reads(config, &timeline, &["slow_a", "slow_b", "slow_c", "slow_d"]);
    });
    let session = core.open_session(None).unwrap();
    let (_, events) = turn(&session, four_calls()).await;
    assert!(batches(&events).iter().all(|b| b.parallel));
    assert!(
        timeline.none_overlap(),
        "max_parallel = 1 runs one at a time"
    );
}

/// Runs the four slow reads with one call replaced and asserts the batch ran serially.
async fn assert_serial(
    replace: Option<clawsmith_protocol::ToolCall>,
    adjust: impl FnOnce(&mut CoreConfig),
) {
    let fixture = Fixture::new();
    fixture.write("a.txt", "alpha\n");
    let timeline = Timeline::default();
    let core = fixture.core(|config| {
        with_slow_reads(config, &timeline, &["slow_a", "slow_b", "slow_c", "slow_d"]);
        config.policy =
            clawsmith_security::PermissionPolicy::new(clawsmith_security::PermissionMode::Full);
        adjust(config);
    });
    let session = core.open_session(None).unwrap();
    let mut calls = four_calls();
    if let Some(replacement) = replace {
        calls[3] = replacement;
    }
    let (results, events) = turn(&session, calls).await;
    assert_eq!(results.len(), 4);
    assert!(timeline.none_overlap(), "serial batch overlapped");
    let infos = batches(&events);
    assert!(!infos.is_empty());
    assert!(
        infos
            .iter()
            .all(|b| !b.parallel && b.size == 4 && b.index == 0),
        "{infos:?}"
    );
    assert_history_paired(&session.messages().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_makes_the_batch_serial() {
    assert_serial(
        Some(call(
            "c4",
            "write_file",
            r#"{"path": "b.txt", "content": "x"}"#,
        )),
        |_| {},
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_argument_makes_the_batch_serial() {
    assert_serial(Some(call("c4", "read_file", r#"{"path": 7}"#)), |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_makes_the_batch_serial() {
    assert_serial(Some(call("c4", "slow_a", r#"{"n": 1}"#)), |_| {}).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsafe_or_risky_tool_makes_the_batch_serial() {
    // Not concurrency-safe.
    assert_serial(Some(call("c4", "todo_write", r#"{"todos": []}"#)), |_| {}).await;
    // Concurrency-safe but its capability raises the effective risk above read.
    let mut risky = TestTool::answering(
        "risky_read",
        clawsmith_protocol::ToolOutput::Text("x".into()),
    );
    risky.capabilities = clawsmith_protocol::CapabilityDeclaration::Missing;
    assert_eq!(risky.risk, Risk::Read);
    assert_serial(Some(call("c4", "risky_read", "{}")), move |config| {
        config.extension_tools.push(ExtensionTool {
            source: "test".into(),
            tool: risky.shared(),
            deferred: false,
        });
    })
    .await;
}

struct AllowAll;

impl Hook for AllowAll {
    fn name(&self) -> &str {
        "allow-all"
    }
    fn check<'a>(&'a self, _input: &'a HookInput) -> HookFuture<'a> {
        Box::pin(async {
            HookDecision {
                decision: HookVerdict::Allow,
                reason: None,
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_make_every_batch_serial() {
    assert_serial(None, |config| config.hooks.push(Arc::new(AllowAll))).await;
}

/// Counts the questions it is asked (and approves them), like `--yes`.
#[derive(Default)]
struct CountingYes {
    asked: std::sync::atomic::AtomicUsize,
}

impl Approver for CountingYes {
    fn approve<'a>(&'a self, _request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { ApprovalAnswer::Approve })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_that_is_never_consulted_keeps_the_batch_parallel() {
    // (ask rule, parallel, questions asked): an approver only matters when a call of the batch
    // asks; then the batch is serial so each question and its audit record come in order.
    let table = [(None, true, 0), (Some("slow_c"), false, 1)];
    for (ask_rule, parallel, questions) in table {
        let fixture = Fixture::new();
        let timeline = Timeline::default();
        let approver = Arc::new(CountingYes::default());
        let core = fixture.core(|config| {
            with_slow_reads(config, &timeline, &["slow_a", "slow_b", "slow_c", "slow_d"]);
            config.approver = Some(approver.clone());
            if let Some(rule) = ask_rule {
                config.policy.rules = clawsmith_security::RuleSet::new()
                    .with(clawsmith_security::RuleEffect::Ask, rule)
                    .unwrap();
            }
        });
        let session = core.open_session(None).unwrap();
        let (results, events) = turn(&session, four_calls()).await;
        for (_, result) in &results {
            assert_status(result, ToolStatus::Success, None);
        }
        assert!(
            batches(&events).iter().all(|b| b.parallel == parallel),
            "{ask_rule:?}: {:?}",
            batches(&events)
        );
        assert_eq!(
            approver.asked.load(std::sync::atomic::Ordering::SeqCst),
            questions
        );
        if parallel {
            assert!(
                timeline.all_overlap(),
                "the four reads ran at the same time"
            );
        } else {
            assert!(timeline.none_overlap(), "serial batch overlapped");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denying_rule_makes_the_batch_serial() {
    let rules = clawsmith_security::RuleSet::new()
        .with(clawsmith_security::RuleEffect::Deny, "slow_b")
        .unwrap();
    let fixture = Fixture::new();
    let timeline = Timeline::default();
    let core = fixture.core(|config| {
        with_slow_reads(config, &timeline, &["slow_a", "slow_b", "slow_c", "slow_d"]);
        config.policy.rules = rules;
    });
    let session = core.open_session(None).unwrap();
    let (results, events) = turn(&session, four_calls()).await;
    assert_status(&results[1].1, ToolStatus::Denied, Some("permission_denied"));
    assert!(batches(&events).iter().all(|b| !b.parallel));
    assert!(timeline.none_overlap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_indexes_count_within_the_turn() {
    let fixture = Fixture::new();
    fixture.write("a.txt", "alpha\n");
    let session = fixture.core(|_| {}).open_session(None).unwrap();
    let sink = clawsmith_core::CollectingSink::new();
    let mut running = session.begin_turn(&sink, TurnOptions::default()).unwrap();
    running
        .run_batch(
            vec![call("c1", "read_file", r#"{"path": "a.txt"}"#)],
            &sink,
            BatchOptions::default(),
        )
        .await
        .unwrap();
    running
        .run_batch(
            vec![
                call("c2", "todo_list", "{}"),
                call("c3", "read_file", r#"{"path": "a.txt", "limit": 1}"#),
            ],
            &sink,
            BatchOptions::default(),
        )
        .await
        .unwrap();
    running.finish(&sink).unwrap();
    assert_eq!(
        batches(&sink.events()),
        [
            BatchInfo {
                index: 0,
                size: 1,
                parallel: false
            },
            BatchInfo {
                index: 1,
                size: 2,
                parallel: true
            },
            BatchInfo {
                index: 1,
                size: 2,
                parallel: true
            },
        ]
    );
}
