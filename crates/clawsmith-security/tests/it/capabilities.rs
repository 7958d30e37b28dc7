use clawsmith_protocol::{Capability, CapabilityDeclaration, Risk};
use clawsmith_security::*;
use serde_json::json;

/// Every capability × every declared risk: effective = max(declared, floor) (S1).
#[test]
fn every_capability_times_every_declared_risk() {
    // (capability, floor)
    let floors = [
        (Capability::FilesystemRead, Risk::Read),
        (Capability::FilesystemWrite, Risk::WorkspaceWrite),
        (Capability::ProcessExecute, Risk::Execute),
        (Capability::Network, Risk::Execute),
        (Capability::Credentials, Risk::Execute),
        (Capability::ExternalSideEffect, Risk::Execute),
        (Capability::SessionRead, Risk::Read),
        (Capability::SessionWrite, Risk::Read),
        (Capability::AgentDelegate, Risk::Read),
    ];
    assert_eq!(floors.len(), Capability::ALL.len());
    for (capability, floor) in floors {
        assert_eq!(capability_floor(capability), floor, "{capability}");
        for declared in Risk::ALL {
            let facts = ToolFacts::from_declaration(
                "t",
                declared,
                &CapabilityDeclaration::Declared(vec![capability]),
            );
            assert_eq!(
                facts.effective_risk,
                declared.max(floor),
                "{capability} declared {declared}"
            );
            assert!(facts.effective_risk >= declared && facts.effective_risk >= floor);
            assert!(facts.capabilities.failed_closed().is_none());
            assert_eq!(facts.side_effect(), facts.effective_risk > Risk::Read);
        }
    }
}

#[test]
fn mixed_sets_take_the_highest_floor() {
    let table = [
        (vec![], Risk::Read),
        (
            vec![Capability::FilesystemRead, Capability::SessionWrite],
            Risk::Read,
        ),
        (
            vec![Capability::FilesystemRead, Capability::FilesystemWrite],
            Risk::WorkspaceWrite,
        ),
        (
            vec![Capability::FilesystemWrite, Capability::Network],
            Risk::Execute,
        ),
    ];
    for (set, floor) in table {
        assert_eq!(risk_floor(set.iter().copied()), floor, "{set:?}");
    }
}

/// Malformed declarations all fail closed: every capability, effective risk `execute` (S2).
#[test]
fn malformed_declarations_fail_closed() {
    let raw = |value: serde_json::Value| CapabilityDeclaration::Raw(value);
    let table = [
        ("missing", CapabilityDeclaration::Missing),
        ("null", raw(json!(null))),
        ("string instead of array", raw(json!("filesystem.read"))),
        ("number", raw(json!(3))),
        ("boolean", raw(json!(true))),
        ("object", raw(json!({"filesystem.read": true}))),
        (
            "unknown capability",
            raw(json!(["filesystem.read", "teleport"])),
        ),
        ("wrong case", raw(json!(["Filesystem.Read"]))),
        ("padded", raw(json!([" network"]))),
        ("underscore spelling", raw(json!(["filesystem_write"]))),
        ("non-string entry", raw(json!(["filesystem.read", 1]))),
        ("null entry", raw(json!([null]))),
        ("nested array", raw(json!([["network"]]))),
        ("empty string entry", raw(json!([""]))),
        ("prefix only", raw(json!(["filesystem"]))),
    ];
    assert!(table.len() >= 10);
    for (name, declaration) in table {
        for declared in Risk::ALL {
            let facts = ToolFacts::from_declaration("t", declared, &declaration);
            assert_eq!(facts.effective_risk, Risk::Execute, "{name}");
            assert_eq!(
                facts.capabilities.to_vec(),
                Capability::ALL.to_vec(),
                "{name}"
            );
            assert!(facts.capabilities.failed_closed().is_some(), "{name}");
        }
    }
}

#[test]
fn well_formed_raw_declarations_are_trusted() {
    let table = [
        (json!([]), vec![], Risk::Read),
        (
            json!(["filesystem.read"]),
            vec![Capability::FilesystemRead],
            Risk::Read,
        ),
        (
            json!(["network", "network"]),
            vec![Capability::Network],
            Risk::Execute,
        ),
        (
            json!(["filesystem.write", "session.read"]),
            vec![Capability::FilesystemWrite, Capability::SessionRead],
            Risk::WorkspaceWrite,
        ),
    ];
    for (value, set, risk) in table {
        let facts = ToolFacts::from_declaration(
            "t",
            Risk::Read,
            &CapabilityDeclaration::Raw(value.clone()),
        );
        assert_eq!(facts.capabilities.to_vec(), set, "{value}");
        assert_eq!(facts.effective_risk, risk, "{value}");
        assert!(facts.capabilities.failed_closed().is_none());
    }
}

#[test]
fn failure_reasons_are_specific() {
    let facts = ToolFacts::from_declaration(
        "t",
        Risk::Read,
        &CapabilityDeclaration::Raw(json!(["teleport"])),
    );
    assert_eq!(
        facts.capabilities.failed_closed(),
        Some("unknown capability \"teleport\"")
    );
    let facts =
        ToolFacts::from_declaration("t", Risk::Read, &CapabilityDeclaration::Raw(json!(null)));
    assert_eq!(
        facts.capabilities.failed_closed(),
        Some("capabilities must be an array of strings, found null")
    );
}

#[test]
fn hook_input_carries_normalized_facts() {
    let facts =
        ToolFacts::from_declaration("mcp__x__y", Risk::Read, &CapabilityDeclaration::Missing);
    let input = HookInput::new(&facts, ("s", "t", "c"), json!({"a": 1}), "do y".into());
    let value = serde_json::to_value(&input).unwrap();
    assert_eq!(value["risk"], "execute");
    assert_eq!(value["declaredRisk"], "read");
    assert_eq!(value["capabilities"].as_array().unwrap().len(), 9);
    assert_eq!(value["sideEffect"], true);
    assert_eq!(value["toolCallId"], "c");
    let decision: HookDecision =
        serde_json::from_value(json!({"decision": "deny", "reason": "no"})).unwrap();
    assert_eq!(decision.decision, HookVerdict::Deny);
    assert!(serde_json::from_value::<HookDecision>(json!({"decision": "maybe"})).is_err());
    assert!(
        serde_json::from_value::<HookDecision>(json!({"decision": "allow", "extra": 1})).is_err()
    );
}
