//! The JSON Schema of spec files, generated from the wire types with schemars (doc comments = descriptions).
//!
//! The committed copy lives in `schema/spec.schema.json`; `trainbench schema` prints it and a test keeps the two
//! in sync. Result schemas (`trainbench schema --result`) belong to the result module and plug in next to
//! [`spec_schema`].

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

use super::wire::SpecFile;

/// The `$id` of the spec schema.
pub const SPEC_SCHEMA_ID: &str = "https://trainbench.dev/schema/spec-v1.json";

/// The JSON Schema (draft 2020-12) every spec file must satisfy, as a JSON value.
pub fn spec_schema() -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let schema = generator.into_root_schema_for::<SpecFile>();
    let mut value = schema.to_value();
    if let Value::Object(root) = &mut value {
        root.insert("$id".into(), Value::String(SPEC_SCHEMA_ID.into()));
    }
    add_integer_bounds(&mut value);
    value
}

/// The spec schema rendered as the committed file holds it (pretty JSON and a final newline).
pub fn spec_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&spec_schema()).unwrap_or_default();
    text.push('\n');
    text
}

/// Give integers with a fixed-width `format` explicit bounds, so the schema (and editors) reject values the
/// Rust types cannot hold instead of leaving it to deserialization.
fn add_integer_bounds(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(bounds) = map.get("format").and_then(Value::as_str).and_then(format_bounds) {
                insert_bound(map, "minimum", bounds.0);
                insert_bound(map, "maximum", bounds.1);
            }
            for child in map.values_mut() {
                add_integer_bounds(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(add_integer_bounds),
        _ => {}
    }
}

fn format_bounds(format: &str) -> Option<(i128, i128)> {
    Some(match format {
        "uint8" => (0, u8::MAX.into()),
        "uint16" => (0, u16::MAX.into()),
        "uint32" => (0, u32::MAX.into()),
        // TOML integers are signed 64-bit: nothing larger can be written (or written back canonically).
        "uint64" | "uint" => (0, i64::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        "int64" | "int" => (i64::MIN.into(), i64::MAX.into()),
        _ => return None,
    })
}

fn insert_bound(map: &mut Map<String, Value>, key: &str, bound: i128) {
    if map.contains_key(key) {
        return;
    }
    let number = if let Ok(v) = i64::try_from(bound) {
        Value::from(v)
    } else if let Ok(v) = u64::try_from(bound) {
        Value::from(v)
    } else {
        return;
    };
    map.insert(key.into(), number);
}
