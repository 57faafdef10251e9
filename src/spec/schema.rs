//! The JSON Schema of spec files, generated from the wire types with schemars (doc comments = descriptions),
//! then shaped for editors: tagged unions select their variant by the tag, and closed tables name their keys.
//!
//! The committed copy lives in `schema/spec.schema.json`; `trainbench schema` prints it and a test keeps the two
//! in sync. Result schemas (`trainbench schema --result`) belong to the result module and plug in next to
//! [`spec_schema`].
//!
//! schemars writes an internally tagged enum (`family`, `kind`, `type`) as a `oneOf` of closed tables; a
//! validator then reports a typo'd key as "not valid under any of the schemas listed in the 'oneOf' keyword"
//! for every variant at once. `select_by_tag` rewrites each into the form [`TaggedUnion`] reads: the tag
//! as an `enum`, and one `if` (tag = value) / `then` (that variant's closed table) per variant under `allOf`,
//! so only the named variant's errors are reported. An always-true `anyOf` lists the variants again: taplo
//! (Even Better TOML) completes keys through `anyOf` but not through `then`.

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

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
    shape_for_editors(&mut value);
    value
}

/// Shape a schemars-generated schema the way every trainbench schema is shaped (integer bounds, tagged unions
/// selected by their tag, closed tables naming their keys); the hardware profile schema uses it too.
pub fn shape_for_editors(value: &mut Value) {
    add_integer_bounds(value);
    select_by_tag(value, "");
    name_the_keys(value);
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

/// A tagged union as [`spec_schema`] writes it: a table whose `tag` key selects the schema of the rest.
#[derive(Debug, Clone)]
pub struct TaggedUnion<'s> {
    /// The tag key (`family`, `kind`, `type`).
    pub tag: &'s str,
    /// Each tag value, in declaration order, with the closed table schema it selects.
    pub variants: Vec<(&'s str, &'s Value)>,
}

impl<'s> TaggedUnion<'s> {
    /// Read a tagged union from its schema; `None` for any other schema.
    pub fn of(schema: &'s Value) -> Option<Self> {
        let items = schema.get("allOf")?.as_array()?;
        let mut tag: Option<&str> = None;
        let mut variants = Vec::with_capacity(items.len());
        for item in items {
            let condition = item.get("if")?.get("properties")?.as_object()?;
            let (name, test) = condition.iter().next().filter(|_| condition.len() == 1)?;
            if tag.is_some_and(|t| t != name) {
                return None;
            }
            tag = Some(name);
            variants.push((test.get("const")?.as_str()?, item.get("then")?));
        }
        Some(Self { tag: tag?, variants })
    }

    /// The tag values, in declaration order.
    pub fn tags(&self) -> Vec<String> {
        self.variants.iter().map(|(value, _)| (*value).to_string()).collect()
    }

    /// The schema the tag value `value` selects.
    pub fn variant(&self, value: &str) -> Option<&'s Value> {
        self.variants.iter().find(|(v, _)| *v == value).map(|(_, schema)| *schema)
    }
}

/// Rewrite every internally tagged `oneOf` (below the schema at JSON pointer `pointer`) into the form
/// [`TaggedUnion::of`] reads. Each variant keeps its description, properties and `additionalProperties: false`.
fn select_by_tag(value: &mut Value, pointer: &str) {
    match value {
        Value::Object(map) => {
            rewrite_tagged(map, pointer);
            for (key, child) in map.iter_mut() {
                select_by_tag(child, &format!("{pointer}/{}", escape(key)));
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter_mut().enumerate() {
                select_by_tag(child, &format!("{pointer}/{i}"));
            }
        }
        _ => {}
    }
}

fn rewrite_tagged(map: &mut Map<String, Value>, pointer: &str) {
    let Some(tag) = map.get("oneOf").and_then(Value::as_array).and_then(|v| common_tag(v)) else { return };
    let Some(Value::Array(variants)) = map.remove("oneOf") else { return };
    let key = escape(&tag);
    let values: Vec<Value> =
        variants.iter().map(|v| v.pointer(&format!("/properties/{key}/const")).cloned().unwrap_or_default()).collect();
    let docs: Vec<Value> = variants.iter().map(|v| v.get("description").cloned().unwrap_or_default()).collect();
    let mut tag_schema = Map::new();
    tag_schema.insert(
        "description".into(),
        format!("Which variant this table is: the other keys allowed here depend on `{tag}`.").into(),
    );
    tag_schema.insert("enum".into(), Value::Array(values.clone()));
    // taplo shows these next to each value it offers for the tag.
    tag_schema.insert("x-taplo".into(), json!({ "docs": { "enumValues": docs } }));
    let mut properties = Map::new();
    properties.insert(tag.clone(), Value::Object(tag_schema));

    let count = variants.len();
    let all_of: Vec<Value> = variants
        .into_iter()
        .zip(values)
        .map(|(mut variant, value)| {
            // The `if` has checked the value. The variant's own `const` gives way to the tag's shared schema:
            // editors merge identical schemas, so they offer the key and each value once, with its docs.
            if let Some(Value::Object(properties)) = variant.get_mut("properties") {
                properties.insert(tag.clone(), json!({ "$ref": format!("#{pointer}/properties/{key}") }));
            }
            let mut test = Map::new();
            test.insert(tag.clone(), json!({ "const": value }));
            json!({ "if": { "type": "object", "properties": test, "required": [tag] }, "then": variant })
        })
        .collect();
    let any_of: Vec<Value> = std::iter::once(Value::Bool(true))
        .chain((0..count).map(|i| json!({ "$ref": format!("#{pointer}/allOf/{i}/then") })))
        .collect();

    map.insert(
        "$comment".into(),
        format!(
            "Tagged by `{tag}`: each `allOf` item applies its `then` when `{tag}` names it. `anyOf` lists the \
             same variants for editors' completion; its `true` makes it accept everything."
        )
        .into(),
    );
    map.insert("type".into(), "object".into());
    map.insert("properties".into(), Value::Object(properties));
    map.insert("required".into(), json!([tag]));
    map.insert("allOf".into(), Value::Array(all_of));
    map.insert("anyOf".into(), Value::Array(any_of));
}

/// `key` as one step of a JSON pointer.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The tag of a `oneOf` whose variants are all tables with a required string `const` property of the same name
/// and distinct values; `None` when it is not internally tagged.
fn common_tag(variants: &[Value]) -> Option<String> {
    let first = variants.first()?.get("properties")?.as_object()?;
    let tagged_by = |name: &str| {
        let mut seen = Vec::with_capacity(variants.len());
        for variant in variants {
            let value = variant.get("properties")?.get(name)?.get("const")?.as_str()?;
            let required = variant.get("required")?.as_array()?.iter().any(|r| r.as_str() == Some(name));
            if !required || seen.contains(&value) {
                return None;
            }
            seen.push(value);
        }
        Some(())
    };
    if variants.len() < 2 {
        return None;
    }
    first.keys().find(|name| tagged_by(name).is_some()).cloned()
}

/// Give every closed table (`additionalProperties: false`) a `propertyNames` enum of its keys, so an editor's
/// message for an unknown key also lists the keys allowed there (`trainbench validate` reports it once, from
/// `additionalProperties`).
fn name_the_keys(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let closed = map.get("additionalProperties") == Some(&Value::Bool(false));
            let keys = map.get("properties").and_then(Value::as_object).map(|p| p.keys().cloned().collect::<Vec<_>>());
            if let (true, Some(keys)) = (closed, keys) {
                map.insert("propertyNames".into(), json!({ "enum": keys }));
            }
            map.values_mut().for_each(name_the_keys);
        }
        Value::Array(items) => items.iter_mut().for_each(name_the_keys),
        _ => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Every schema object in `value`, with its JSON pointer.
    fn walk<'v>(value: &'v Value, pointer: String, out: &mut Vec<(String, &'v Map<String, Value>)>) {
        match value {
            Value::Object(map) => {
                out.push((pointer.clone(), map));
                map.iter().for_each(|(k, v)| walk(v, format!("{pointer}/{k}"), out));
            }
            Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| walk(v, format!("{pointer}/{i}"), out)),
            _ => {}
        }
    }

    #[test]
    fn tagged_enums_select_their_variant_by_the_tag() {
        let schema = spec_schema();
        for (def, tag, count) in
            [("ModelSpec", "family", 15), ("CustomLayer", "type", 21), ("OptimizerSpec", "kind", 3)]
        {
            let union_schema = &schema["$defs"][def];
            let union = TaggedUnion::of(union_schema).unwrap();
            assert_eq!((union.tag, union.variants.len()), (tag, count), "{def}");
            assert_eq!(union_schema["properties"][tag]["enum"], json!(union.tags()), "{def}");
            assert_eq!(union_schema["required"], json!([tag]), "{def}");
            for (value, variant) in &union.variants {
                // Each variant stays a closed, described table that allows the tag.
                assert_eq!(variant["additionalProperties"], false, "{def} {value}");
                assert!(variant["description"].is_string(), "{def} {value}");
                assert!(variant["properties"][tag].is_object(), "{def} {value}");
            }
            // Editors complete keys through `anyOf`: it names every variant and accepts everything.
            let any_of = union_schema["anyOf"].as_array().unwrap();
            assert_eq!(any_of[0], true);
            let listed: Vec<&Value> = any_of[1..]
                .iter()
                .map(|r| schema.pointer(r["$ref"].as_str().unwrap().strip_prefix('#').unwrap()).unwrap())
                .collect();
            let variants: Vec<&Value> = union.variants.iter().map(|(_, v)| *v).collect();
            assert_eq!(listed, variants, "{def}");
        }
    }

    #[test]
    fn no_internally_tagged_one_of_is_left() {
        let schema = spec_schema();
        let mut all = Vec::new();
        walk(&schema, String::new(), &mut all);
        for (pointer, map) in all {
            if let Some(Value::Array(variants)) = map.get("oneOf") {
                assert_eq!(common_tag(variants), None, "{pointer}");
            }
        }
    }

    #[test]
    fn closed_tables_name_their_keys() {
        let schema = spec_schema();
        let mut all = Vec::new();
        walk(&schema, String::new(), &mut all);
        let closed: Vec<_> = all.iter().filter(|(_, m)| m.get("additionalProperties") == Some(&json!(false))).collect();
        assert!(closed.len() > 40, "{}", closed.len());
        for (pointer, map) in closed {
            let keys: Vec<&String> = map["properties"].as_object().unwrap().keys().collect();
            assert_eq!(map["propertyNames"], json!({ "enum": keys }), "{pointer}");
        }
    }

    #[test]
    fn a_typo_in_a_variant_fails_that_variant_only() {
        let schema = spec_schema();
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        let spec = json!({
            "version": 1,
            "name": "typo",
            "model": { "family": "mlp", "inputz": 64, "hidden": [32], "classes": 10 },
        });
        let errors: Vec<(String, String)> = validator
            .iter_errors(&spec)
            .map(|e| (e.instance_path().to_string(), e.kind().keyword().to_string()))
            .collect();
        let expected = [("/model", "additionalProperties"), ("/model", "propertyNames")];
        assert_eq!(errors, expected.map(|(p, k)| (p.to_string(), k.to_string())));
    }
}
