//! Property tests: whatever a tool declares, effective risk never falls below the floor.

use clawsmith_protocol::{Capability, CapabilityDeclaration, Risk};
use clawsmith_security::*;
use proptest::prelude::*;
use serde_json::Value;

fn any_risk() -> impl Strategy<Value = Risk> {
    prop::sample::select(Risk::ALL.to_vec())
}

fn any_capability() -> impl Strategy<Value = Capability> {
    prop::sample::select(Capability::ALL.to_vec())
}

/// Arbitrary JSON, biased towards arrays of capability-like strings.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z._-]{0,24}".prop_map(Value::String),
        any_capability().prop_map(|c| Value::String(c.as_str().to_owned())),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn typed_declarations_never_fall_below_the_floor(
        declared in any_risk(),
        set in prop::collection::vec(any_capability(), 0..9),
    ) {
        let facts = ToolFacts::from_declaration("t", declared, &CapabilityDeclaration::Declared(set.clone()));
        let floor = risk_floor(set.iter().copied());
        prop_assert!(facts.effective_risk >= floor);
        prop_assert!(facts.effective_risk >= declared);
        prop_assert_eq!(facts.effective_risk, declared.max(floor));
    }

    #[test]
    fn raw_declarations_are_exact_or_fail_closed(declared in any_risk(), value in any_json()) {
        let facts = ToolFacts::from_declaration("t", declared, &CapabilityDeclaration::Raw(value.clone()));
        prop_assert!(facts.effective_risk >= declared);
        prop_assert!(facts.effective_risk >= facts.capabilities.floor());
        match facts.capabilities.failed_closed() {
            Some(_) => {
                prop_assert_eq!(facts.effective_risk, Risk::Execute);
                prop_assert_eq!(facts.capabilities.to_vec(), Capability::ALL.to_vec());
            }
            None => {
                // Trusted only when every entry is an exact capability string.
                let items = value.as_array().expect("trusted declarations are arrays");
                for item in items {
                    prop_assert!(item.as_str().and_then(Capability::parse).is_some(), "{}", item);
                }
            }
        }
    }
}
