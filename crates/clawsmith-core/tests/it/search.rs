//! A9: deferred tools, `search_tools` ranking, activation from the next request, evidence.

use clawsmith_core::{
    BatchOptions, CollectingSink, ExtensionTool, OpeningRequest, SearchDocument, TurnOptions, rank,
};
use clawsmith_protocol::{EventPayload, SearchMetadata, ToolOutput, ToolStatus};

use crate::support::*;

fn deferred(
    name: &str,
    aliases: &[&str],
    tags: &[&str],
    hint: &str,
    description: &str,
) -> ExtensionTool {
    let mut tool = TestTool::answering(name, ToolOutput::Text(format!("{name} ran")));
    tool.description = description.to_owned();
    tool.deferred = Some(SearchMetadata {
        aliases: aliases.iter().map(|s| s.to_string()).collect(),
        tags: tags.iter().map(|s| s.to_string()).collect(),
        search_hint: (!hint.is_empty()).then(|| hint.to_owned()),
    });
    ExtensionTool {
        source: "mcp:test".into(),
        tool: tool.shared(),
        deferred: true,
    }
}

#[test]
fn ranking_table() {
    let document = |name: &str, aliases: &[&str], tags: &[&str], hint: &str, description: &str| {
        SearchDocument {
            name: name.into(),
            aliases: aliases.iter().map(|s| s.to_string()).collect(),
            tags: tags.iter().map(|s| s.to_string()).collect(),
            search_hint: (!hint.is_empty()).then(|| hint.to_owned()),
            description: description.into(),
        }
    };
    let documents = vec![
        document(
            "jira_create",
            &["ticket"],
            &["issues"],
            "file a bug",
            "Create a Jira issue",
        ),
        document(
            "github_issue",
            &["gh-issue"],
            &["github"],
            "",
            "Open a GitHub issue",
        ),
        document("issue_list", &[], &[], "", "List things"),
        document("calendar", &[], &["meetings"], "issue invites", "Schedule"),
        document("mail", &[], &[], "", "Send mail about an issue"),
        document("aaa_tag", &[], &["issue"], "", ""),
    ];
    // (query, expected order)
    let table: &[(&str, &[&str])] = &[
        // name (16+) > alias (8) > tag (4) > hint (2) > description (1), summed per field;
        // jira_create: tag `issues` 4 + description 1 beats aaa_tag's tag alone.
        (
            "issue",
            &[
                "github_issue",
                "issue_list",
                "jira_create",
                "aaa_tag",
                "calendar",
                "mail",
            ],
        ),
        ("ticket", &["jira_create"]),
        ("github", &["github_issue"]),
        ("meetings", &["calendar"]),
        ("bug", &["jira_create"]),
        ("calendar", &["calendar"]),
        ("nothing-matches", &[]),
        ("", &[]),
    ];
    for (query, expected) in table {
        let names: Vec<String> = rank(query, &documents)
            .into_iter()
            .map(|hit| hit.name)
            .collect();
        assert_eq!(&names, expected, "query {query:?}");
    }
}

#[tokio::test]
async fn activation_is_visible_from_the_next_request_with_evidence() {
    let fixture = Fixture::new();
    let core = fixture.core(|config| {
        config.extension_tools.push(deferred(
            "jira_create",
            &["ticket"],
            &["issues"],
            "",
            "Create a Jira issue",
        ));
        config
            .extension_tools
            .push(deferred("calendar", &[], &["meetings"], "", "Schedule"));
    });
    // search_tools exists because deferred tools do; deferred tools are not shown.
    assert!(core.tools().get("search_tools").is_some());
    let session = core.open_session(None).unwrap();
    let sink = CollectingSink::new();
    let mut running = session.begin_turn(&sink, TurnOptions::default()).unwrap();
    let first = running.model_request(&sink).unwrap();
    assert!(!first.tool_names.contains(&"jira_create".to_owned()));
    assert!(first.tool_names.contains(&"search_tools".to_owned()));
    assert!(first.activated_tools.is_empty());
    assert_eq!(first.tool_schema_sha256, core.initial_tool_schema_sha256());
    assert!(!first.tools.iter().any(|tool| tool.name == "jira_create"));

    // Before activation: inactive_tool, retryable.
    let results = running
        .run_batch(
            vec![
                call("c1", "jira_create", "{}"),
                call("c2", "search_tools", r#"{"query": "ticket"}"#),
                call("c3", "jira_create", r#"{"x": 1}"#),
            ],
            &sink,
            BatchOptions::default(),
        )
        .await
        .unwrap();
    assert_status(&results[0].1, ToolStatus::Error, Some("inactive_tool"));
    assert_eq!(results[0].1.metadata.retryable, Some(true));
    assert_status(&results[1].1, ToolStatus::Success, None);
    assert!(results[1].1.content.contains("jira_create"));
    // Still inactive in the same request that activated it.
    assert_status(&results[2].1, ToolStatus::Error, Some("inactive_tool"));
    assert!(results[2].1.content.contains("next request"));

    let second = running.model_request(&sink).unwrap();
    assert!(second.tool_names.contains(&"jira_create".to_owned()));
    assert!(!second.tool_names.contains(&"calendar".to_owned()));
    assert_eq!(second.activated_tools, ["jira_create"]);
    assert_ne!(second.tool_schema_sha256, first.tool_schema_sha256);
    assert_ne!(second.request_id, first.request_id);
    let results = running
        .run_batch(
            vec![call("c4", "jira_create", "{}")],
            &sink,
            BatchOptions::default(),
        )
        .await
        .unwrap();
    assert_status(&results[0].1, ToolStatus::Success, None);
    running.finish(&sink).unwrap();

    // The evidence is stored as model.request events with requestId.
    let requests: Vec<_> = session
        .events()
        .unwrap()
        .into_iter()
        .filter_map(|event| match event.payload {
            EventPayload::ModelRequest(request) => Some(request),
            _ => None,
        })
        .collect();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].request_id, first.request_id);
    assert_eq!(requests[1].composition.activated_tools, ["jira_create"]);
    assert_eq!(requests[1].tool_schema_sha256, second.tool_schema_sha256);
    assert_eq!(requests[1].turn_id, Some(first_turn_id(&session)));

    // Reopening the session restores the activation of the last request.
    let reopened = core.open_session(Some(session.id().to_owned())).unwrap();
    let evidence = reopened.model_request(&sink).unwrap();
    assert_eq!(evidence.activated_tools, ["jira_create"]);
    assert_eq!(evidence.tool_schema_sha256, second.tool_schema_sha256);
}

fn first_turn_id(session: &clawsmith_core::SessionHandle) -> String {
    session
        .events()
        .unwrap()
        .into_iter()
        .find_map(|event| match event.payload {
            EventPayload::TurnStarted(started) => Some(started.turn_id),
            _ => None,
        })
        .unwrap()
}

#[tokio::test]
async fn no_deferred_tools_means_no_search_tools() {
    let fixture = Fixture::new();
    let core = fixture.core(|_| {});
    assert!(core.tools().get("search_tools").is_none());
}

/// A turn begun with its request (the MCP server's one request per turn) stores the same two
/// events as `begin_turn` then `model_request` — `turn.started`, then `model.request` naming the
/// turn — and promotes an activation the same way, in the commit that opens the turn.
#[tokio::test]
async fn a_turn_begun_with_its_request_stores_both_events_in_order() {
    let fixture = Fixture::new();
    let core = fixture.core(|config| {
        config.extension_tools.push(deferred(
            "jira_create",
            &["ticket"],
            &["issues"],
            "",
            "Create a Jira issue",
        ));
    });
    let session = core.open_session(None).unwrap();
    let sink = CollectingSink::new();
    let with_request = TurnOptions {
        request: OpeningRequest::WithTools,
        ..TurnOptions::default()
    };
    let mut turn = session.begin_turn(&sink, with_request).unwrap();
    let first = turn.take_opening_request().unwrap();
    assert!(first.activated_tools.is_empty());
    assert_eq!(first.turn_id.as_deref(), Some(turn.id()));
    let results = turn
        .run_batch(
            vec![call("c1", "search_tools", r#"{"query": "ticket"}"#)],
            &sink,
            BatchOptions::default(),
        )
        .await
        .unwrap();
    assert_status(&results[0].1, ToolStatus::Success, None);
    turn.finish(&sink).unwrap();
    let mut next = session.begin_turn(&sink, with_request).unwrap();
    let second = next.take_opening_request().unwrap();
    assert_eq!(second.activated_tools, ["jira_create"]);
    next.finish(&sink).unwrap();

    let events = session.events().unwrap();
    assert_sequences(&events);
    let kinds: Vec<&str> = events.iter().map(|event| event.payload.kind()).collect();
    assert_eq!(
        kinds,
        [
            "turn.started",
            "model.request",
            "tool.started",
            "tool.completed",
            "turn.completed",
            "turn.started",
            "model.request",
            "turn.completed"
        ]
    );
    let EventPayload::ModelRequest(stored) = &events[6].payload else {
        panic!("not a model.request: {:?}", events[6]);
    };
    assert_eq!(stored.request_id, second.request_id);
    assert_eq!(stored.turn_id, second.turn_id);
    // The sink saw what the store holds, in the same order.
    let seen: Vec<u64> = sink.events().iter().map(|event| event.sequence).collect();
    assert_eq!(seen, (1..=8).collect::<Vec<u64>>());
}
