//! The JSON Schema of [`RunResult`], as written to `schema/result.schema.json`.

use super::run::RunResult;

/// The `$id` of the result schema.
pub const RESULT_SCHEMA_ID: &str = "https://trainbench.dev/schema/result-v1.json";

/// The JSON Schema (draft 2020-12) of [`RunResult`], as written to `schema/result.schema.json`.
pub fn result_schema() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let mut value = generator.into_root_schema_for::<RunResult>().to_value();
    if let serde_json::Value::Object(root) = &mut value {
        root.insert("$id".into(), serde_json::Value::String(RESULT_SCHEMA_ID.into()));
    }
    value
}

/// The result schema as the committed file holds it (pretty JSON and a final newline).
pub fn result_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&result_schema()).unwrap_or_default();
    text.push('\n');
    text
}
