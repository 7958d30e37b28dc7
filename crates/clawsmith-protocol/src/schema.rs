//! The protocol's JSON Schema, generated from the same Rust types that (de)serialize it.
//! `cargo xtask codegen` writes it to `docs/protocol.schema.json`.

use schemars::generate::SchemaSettings;

use crate::{Event, ModelMessage, PermissionDecision, ToolExecutionResult, ToolResultSummary};

/// One JSON Schema document whose `$defs` hold every wire type of the protocol.
pub fn protocol_schema() -> serde_json::Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let roots = [
        (
            "ToolExecutionResult",
            generator.subschema_for::<ToolExecutionResult>(),
        ),
        (
            "ToolResultSummary",
            generator.subschema_for::<ToolResultSummary>(),
        ),
        ("Event", generator.subschema_for::<Event>()),
        ("ModelMessage", generator.subschema_for::<ModelMessage>()),
        (
            "PermissionDecision",
            generator.subschema_for::<PermissionDecision>(),
        ),
    ];
    let mut defs = serde_json::Map::new();
    for (name, schema) in generator.take_definitions(true) {
        defs.insert(name, schema);
    }
    let one_of: Vec<serde_json::Value> = roots
        .iter()
        .map(|(_, schema)| schema.clone().to_value())
        .collect();
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "clawsmith protocol",
        "description": "Wire types of the clawsmith tool runtime (generated; do not edit).",
        "oneOf": one_of,
        "$defs": defs,
    })
}
