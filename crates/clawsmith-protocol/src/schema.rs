//! The protocol's JSON Schema, generated from the same Rust types that (de)serialize it.
//! `cargo xtask codegen` writes it to `docs/protocol.schema.json`.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;

use crate::{
    ErrorCode, Event, ModelMessage, PermissionDecision, ToolExecutionResult, ToolResultSummary,
};

/// The JSON Schema of a tool's arguments, from the Rust type its calls are parsed into. With
/// [`parse_input`] over the same type, the schema the model sees and the parser that reads its
/// call cannot disagree (P1).
pub fn input_schema<T: JsonSchema>() -> serde_json::Value {
    schemars::schema_for!(T).to_value()
}

/// Parses a tool's arguments into the type its schema came from ([`input_schema`]); what does
/// not fit is refused with `invalid_arguments`, naming the tool and what serde found.
#[allow(clippy::result_large_err)] // the refusal is the result handed back, built once per call
pub fn parse_input<T: DeserializeOwned>(
    tool: &str,
    input: serde_json::Value,
) -> Result<T, ToolExecutionResult> {
    serde_json::from_value(input).map_err(|error| {
        ToolExecutionResult::failure(
            ErrorCode::INVALID_ARGUMENTS,
            format!("Invalid arguments for {tool}: {error}"),
        )
    })
}

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
