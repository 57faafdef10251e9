//! Turns JSON Schema validation errors into human diagnostics: unknown keys with a did-you-mean, enum values
//! with the allowed list, and, for the internally tagged `family` / `kind` / `type` tables (a
//! [`TaggedUnion`] in the schema), messages that name the tag and its values.

use jsonschema::ValidationError;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::Value;

use super::diagnostics::Diagnostic;
use super::load::{self, Node, NodeKind, Sources};
use super::path::{FieldPath, Segment};
use super::schema::TaggedUnion;

/// Everything needed to explain a schema error: the schema, the instance (JSON and spanned tree), the sources.
pub struct Humanizer<'a> {
    /// The spec schema.
    pub schema: &'a Value,
    /// The document as validated.
    pub instance: &'a Value,
    /// The document with spans.
    pub root: &'a Node,
    /// The texts spans point into.
    pub sources: &'a Sources,
    /// Paths whose values were already reported as unusable (errors at or below them are dropped).
    pub poisoned: &'a [FieldPath],
}

/// Where in the source to point for a value: at its key (unknown keys) or at the value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    Key,
    Value,
}

impl Humanizer<'_> {
    /// The diagnostics explaining one schema error (usually one; several for several unknown keys).
    pub fn explain(&self, error: &ValidationError<'_>) -> Vec<Diagnostic> {
        let path = FieldPath::from_pointer(error.instance_path().as_str(), self.instance);
        if self.poisoned.iter().any(|p| path.starts_with(p)) {
            return Vec::new();
        }
        match error.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let table = parent_pointer(error.schema_path().as_str()).and_then(|p| self.schema.pointer(p));
                let max = super::diagnostics::MAX_DIAGNOSTICS;
                unexpected.iter().take(max + 1).map(|key| self.unknown_key(&path, key, table)).collect()
            }
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default();
                vec![self.missing_key(&path, name)]
            }
            ValidationErrorKind::Type { kind } => match self.tagged_at(&path) {
                Some(union) => vec![self.not_a_tagged_table(&path, &union)],
                None => vec![self.wrong_type(&path, kind)],
            },
            ValidationErrorKind::Enum { options } => vec![self.bad_choice(&path, options)],
            ValidationErrorKind::Constant { expected_value } => {
                let d = self.at(&path, At::Value, format!("`{path}` must be {}", show(expected_value)));
                vec![d]
            }
            ValidationErrorKind::Minimum { limit } => vec![self.bound(&path, "at least", limit)],
            ValidationErrorKind::ExclusiveMinimum { limit } => vec![self.bound(&path, "greater than", limit)],
            ValidationErrorKind::Maximum { limit } => vec![self.bound(&path, "at most", limit)],
            ValidationErrorKind::ExclusiveMaximum { limit } => vec![self.bound(&path, "less than", limit)],
            ValidationErrorKind::MinItems { limit } => {
                let n = self.value_at(&path).and_then(Value::as_array).map_or(0, Vec::len);
                let s = if *limit == 1 { "" } else { "s" };
                vec![self.at(&path, At::Value, format!("`{path}` must have at least {limit} item{s}, found {n}"))]
            }
            ValidationErrorKind::MaxItems { limit } => {
                vec![self.at(&path, At::Value, format!("`{path}` must have at most {limit} items"))]
            }
            ValidationErrorKind::MinLength { limit } => {
                let s = if *limit == 1 { "" } else { "s" };
                vec![self.at(&path, At::Value, format!("`{path}` must be at least {limit} character{s} long"))]
            }
            ValidationErrorKind::MaxLength { limit } => {
                vec![self.at(&path, At::Value, format!("`{path}` must be at most {limit} characters long"))]
            }
            ValidationErrorKind::Pattern { pattern } => {
                let value = self.value_at(&path).map(show).unwrap_or_default();
                let d = self.at(&path, At::Value, format!("{value} is not a valid `{path}`"));
                let hint = if path == FieldPath::keys(&["name"]) {
                    Some(
                        "use letters, digits, `-`, `_` and `.`, starting with a letter or digit, e.g. `my-bench`"
                            .into(),
                    )
                } else {
                    self.description_at(&path)
                };
                vec![d.expected(format!("text matching `{pattern}`")).maybe_hint(hint)]
            }
            ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context } => {
                let variants = self.schema.pointer(error.schema_path().as_str()).and_then(Value::as_array);
                self.alternatives(&path, variants, context)
            }
            _ => vec![self.at(&path, At::Value, error.masked().to_string())],
        }
    }

    /// A diagnostic pointing at the key or value at `path` (or the closest existing table).
    fn at(&self, path: &FieldPath, at: At, message: String) -> Diagnostic {
        let loc = load::locate(self.root, path);
        let span = match (at, &loc.key_span) {
            (At::Key, Some(k)) => k,
            _ => &loc.span,
        };
        self.sources.diagnostic(span, path, message)
    }

    fn value_at(&self, path: &FieldPath) -> Option<&Value> {
        let mut v = self.instance;
        for s in &path.0 {
            v = match (v, s) {
                (Value::Object(m), Segment::Key(k)) => m.get(k)?,
                (Value::Array(a), Segment::Index(i)) => a.get(*i)?,
                _ => return None,
            };
        }
        Some(v)
    }

    fn unknown_key(&self, table: &FieldPath, key: &str, table_schema: Option<&Value>) -> Diagnostic {
        let allowed = table_schema
            .or_else(|| self.schema_at(table, true))
            .map(|s| property_names(self.schema, s))
            .unwrap_or_default();
        let mut message = format!("unknown key `{key}` in {}", table.table_display());
        if let Some((tag, value)) = self.tag_of(table) {
            message.push_str(&format!(" ({tag} `{value}`)"));
        }
        let d = self.at(&table.key(key), At::Key, message);
        let hint = closest(key, allowed.iter().map(String::as_str))
            .map(|c| format!("did you mean `{c}`?"))
            .or_else(|| self.home_table_of(key, table).map(|t| format!("`{key}` is a key of [{t}]")));
        d.expected(format!("one of {}", list(&allowed))).maybe_hint(hint)
    }

    fn missing_key(&self, table: &FieldPath, key: &str) -> Diagnostic {
        let message = format!("missing required key `{key}` in {}", table.table_display());
        let d = if table.is_root() {
            // The top-level table has no header to point at: the diagnostic is about the file.
            let mut d = Diagnostic::error(self.sources.file(), message);
            d.path = key.to_string();
            d
        } else {
            self.at(table, At::Value, message)
        };
        let union = self.tagged_at(table).filter(|u| u.tag == key);
        let described = self.description_at(&table.key(key));
        let d = match (union, described) {
            (Some(union), _) => d.expected(format!("`{key}` = one of {}", list(&union.tags()))),
            (None, Some(text)) => d.expected(format!("`{key}`: {text}")),
            (None, None) => d,
        };
        match (table.is_root(), key) {
            (true, "model") => d.hint("add a [model] table, e.g. `[model]` then `family = \"resnet\"`"),
            (true, "version") => d.hint("add `version = 1` at the top of the file"),
            (true, "name") => d.hint("add a `name = \"...\"` at the top of the file (letters, digits, `-`, `_`, `.`)"),
            _ => d,
        }
    }

    fn wrong_type(&self, path: &FieldPath, kind: &TypeKind) -> Diagnostic {
        let expected: Vec<&str> = match kind {
            TypeKind::Single(t) => vec![json_type_name(&t.to_string())],
            TypeKind::Multiple(set) => {
                set.iter().map(|t| json_type_name(&t.to_string())).filter(|t| !t.is_empty()).collect()
            }
        };
        let expected = expected.join(" or ");
        let node = load::get(self.root, path);
        let found = node.map_or("nothing", Node::type_name);
        let d = self.at(path, At::Value, format!("wrong type for `{path}`: expected {expected}, found {found}"));
        let hint = match node.map(|n| &n.kind) {
            Some(NodeKind::String(s)) if expected.contains("integer") && s.trim().parse::<i64>().is_ok() => {
                Some(format!("remove the quotes: `{} = {}`", path.last_key().unwrap_or("key"), s.trim()))
            }
            Some(NodeKind::String(s)) if expected.contains("number") && s.trim().parse::<f64>().is_ok() => {
                Some(format!("remove the quotes: `{} = {}`", path.last_key().unwrap_or("key"), s.trim()))
            }
            Some(NodeKind::String(s)) if expected.contains("boolean") && matches!(s.trim(), "true" | "false") => {
                Some(format!("remove the quotes: `{} = {}`", path.last_key().unwrap_or("key"), s.trim()))
            }
            Some(NodeKind::Float(f)) if expected.contains("integer") => {
                Some(format!("write a whole number without a decimal point (found `{f}`)"))
            }
            Some(NodeKind::Integer { text, .. } | NodeKind::Float(text)) if expected.contains("array") => {
                Some(format!("write a list, e.g. `{} = [{text}]`", path.last_key().unwrap_or("key")))
            }
            Some(NodeKind::String(s)) if expected.contains("array") => {
                Some(format!("write a list, e.g. `{} = [\"{s}\"]`", path.last_key().unwrap_or("key")))
            }
            _ => None,
        };
        d.expected(expected).maybe_hint(hint)
    }

    fn bad_choice(&self, path: &FieldPath, options: &Value) -> Diagnostic {
        let choices: Vec<String> = options
            .as_array()
            .map_or_else(Vec::new, |a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect());
        // The tag of a tagged table is "an unknown family", not "an unknown value".
        let tag = path.last_key().filter(|key| self.tagged_at(&path.parent()).is_some_and(|u| u.tag == *key));
        self.choice_diagnostic(path, &choices, tag.unwrap_or("value"))
    }

    /// A tagged table given as something else (`model = "resnet"`).
    fn not_a_tagged_table(&self, path: &FieldPath, union: &TaggedUnion<'_>) -> Diagnostic {
        let found = load::get(self.root, path).map_or("nothing", Node::type_name);
        let tag = union.tag;
        let d = self.at(
            path,
            At::Value,
            format!("wrong type for `{path}`: expected a table with a `{tag}` key, found {found}"),
        );
        d.expected(format!("a table with `{tag}` = one of {}", list(&union.tags())))
    }

    fn choice_diagnostic(&self, path: &FieldPath, choices: &[String], what: &str) -> Diagnostic {
        let value = self.value_at(path);
        let d = match value {
            Some(Value::String(s)) => self.at(path, At::Value, format!("unknown {what} `{s}` for `{path}`")),
            _ => {
                let found = load::get(self.root, path).map_or("nothing", Node::type_name);
                self.at(path, At::Value, format!("wrong type for `{path}`: expected a string, found {found}"))
            }
        };
        let hint = value
            .and_then(Value::as_str)
            .and_then(|s| closest(s, choices.iter().map(String::as_str)))
            .map(|c| format!("did you mean `{c}`?"));
        d.expected(format!("one of {}", list(choices))).maybe_hint(hint)
    }

    fn bound(&self, path: &FieldPath, relation: &str, limit: &Value) -> Diagnostic {
        let value = self.value_at(path).map(show).unwrap_or_default();
        self.at(path, At::Value, format!("`{path}` must be {relation} {limit}, found {value}"))
            .expected(format!("a value {relation} {limit}"))
    }

    /// `oneOf` / `anyOf`: explain through the variant the value's shape selects.
    fn alternatives(
        &self,
        path: &FieldPath,
        variants: Option<&Vec<Value>>,
        context: &[Vec<ValidationError<'static>>],
    ) -> Vec<Diagnostic> {
        let Some(variants) = variants else {
            return vec![self.at(path, At::Value, format!("`{path}` does not match the schema"))];
        };
        let variants: Vec<&Value> = variants.iter().map(|v| resolve(self.schema, v)).collect();
        let value = self.value_at(path);
        let candidates: Vec<usize> =
            variants.iter().enumerate().filter(|(_, v)| !is_null_schema(v)).map(|(i, _)| i).collect();
        let words: Vec<String> = candidates
            .iter()
            .filter_map(|&i| variants[i].get("const").and_then(Value::as_str).map(String::from))
            .collect();
        if !words.is_empty() && words.len() == candidates.len() {
            return vec![self.choice_diagnostic(path, &words, "value")];
        }
        let matching_shape: Vec<usize> =
            candidates.iter().copied().filter(|&i| value.is_some_and(|v| shape_fits(variants[i], v))).collect();
        let pick = if candidates.len() == 1 {
            Some(candidates[0])
        } else if matching_shape.len() == 1 {
            Some(matching_shape[0])
        } else {
            None
        };
        if let Some(i) = pick {
            if let Some(errs) = context.get(i) {
                return errs.iter().flat_map(|e| self.explain(e)).collect();
            }
        }
        let forms: Vec<String> = candidates.iter().map(|&i| describe_form(variants[i])).collect();
        let found = load::get(self.root, path).map_or("nothing", Node::type_name);
        let d = self.at(path, At::Value, format!("`{path}` does not match any allowed form (found {found})"));
        vec![d.expected(forms.join(", or "))]
    }

    /// The schema describing the value at `path` (following `$ref`, properties, items and tagged variants).
    /// With `pick_last`, a tagged union or `oneOf` at the path itself is narrowed to the variant the instance
    /// selects.
    fn schema_at(&self, path: &FieldPath, pick_last: bool) -> Option<&Value> {
        let mut schema = resolve(self.schema, self.schema);
        let mut value = Some(self.instance);
        for segment in &path.0 {
            schema = pick_variant(self.schema, schema, value);
            schema = match segment {
                Segment::Key(k) => schema
                    .get("properties")
                    .and_then(|p| p.get(k))
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))?,
                Segment::Index(_) => schema.get("items")?,
            };
            schema = resolve(self.schema, schema);
            value = value.and_then(|v| match (v, segment) {
                (Value::Object(m), Segment::Key(k)) => m.get(k),
                (Value::Array(a), Segment::Index(i)) => a.get(*i),
                _ => None,
            });
        }
        Some(if pick_last { pick_variant(self.schema, schema, value) } else { schema })
    }

    fn description_at(&self, path: &FieldPath) -> Option<String> {
        let parent = self.schema_at(&path.parent(), true)?;
        let key = path.last_key()?;
        let prop = parent.get("properties")?.get(key)?;
        let text = prop.get("description").or_else(|| resolve(self.schema, prop).get("description"))?.as_str()?;
        Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
    }

    /// The tagged union the table at `path` is an instance of, if it is one.
    fn tagged_at(&self, path: &FieldPath) -> Option<TaggedUnion<'_>> {
        TaggedUnion::of(self.schema_at(path, false)?)
    }

    /// The tag and its value when the table at `path` is a tagged variant (`family` `resnet`).
    fn tag_of(&self, path: &FieldPath) -> Option<(String, String)> {
        let tag = self.tagged_at(path)?.tag;
        let value = self.value_at(path)?.get(tag)?.as_str()?.to_string();
        Some((tag.to_string(), value))
    }

    /// The top-level table (other than `table`) that has `key` among its keys, if exactly one does.
    fn home_table_of(&self, key: &str, table: &FieldPath) -> Option<String> {
        let root = resolve(self.schema, self.schema);
        let homes: Vec<&String> = root
            .get("properties")?
            .as_object()?
            .iter()
            .filter(|(name, prop)| {
                FieldPath::keys(&[name.as_str()]) != *table
                    && property_names(self.schema, resolve(self.schema, prop)).iter().any(|k| k == key)
            })
            .map(|(name, _)| name)
            .collect();
        if homes.len() == 1 { Some(homes[0].clone()) } else { None }
    }
}

/// The JSON pointer of the schema object holding the keyword a schema path ends in.
fn parent_pointer(schema_path: &str) -> Option<&str> {
    schema_path.rsplit_once('/').map(|(parent, _)| parent)
}

/// Follow `$ref`s (local `#/$defs/...` only) to the schema they name.
fn resolve<'s>(root: &'s Value, mut schema: &'s Value) -> &'s Value {
    for _ in 0..16 {
        let Some(reference) = schema.get("$ref").and_then(Value::as_str) else { break };
        let Some(pointer) = reference.strip_prefix('#') else { break };
        match root.pointer(pointer) {
            Some(target) => schema = target,
            None => break,
        }
    }
    schema
}

/// The variant of a tagged union or `oneOf`/`anyOf` schema that `value` selects (by tag, or the only non-null
/// one). A tagged union whose tag is missing or unknown stays itself (its properties are the tag alone).
fn pick_variant<'s>(root: &'s Value, schema: &'s Value, value: Option<&Value>) -> &'s Value {
    if let Some(union) = TaggedUnion::of(schema) {
        let name = value.and_then(|v| v.get(union.tag)).and_then(Value::as_str);
        return name.and_then(|n| union.variant(n)).unwrap_or(schema);
    }
    let Some(list) = schema.get("oneOf").or_else(|| schema.get("anyOf")).and_then(Value::as_array) else {
        return schema;
    };
    let variants: Vec<&Value> = list.iter().map(|v| resolve(root, v)).collect();
    let fitting: Vec<&Value> =
        variants.iter().copied().filter(|v| !is_null_schema(v) && value.is_none_or(|x| shape_fits(v, x))).collect();
    if fitting.len() == 1 { fitting[0] } else { schema }
}

fn is_null_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("null")
}

/// Whether `value` has the JSON type a schema variant accepts (ignoring everything else).
fn shape_fits(schema: &Value, value: &Value) -> bool {
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => {
            if let Some(c) = schema.get("const") {
                return std::mem::discriminant(c) == std::mem::discriminant(value);
            }
            return true;
        }
    };
    types.iter().any(|t| match *t {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    })
}

/// How to write a value of one alternative form, for "expected:" lines.
fn describe_form(schema: &Value) -> String {
    if let Some(c) = schema.get("const") {
        return show(c);
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        return options.iter().map(show).collect::<Vec<_>>().join(", ");
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        let keys: Vec<String> = required.iter().filter_map(Value::as_str).map(|k| format!("`{k}`")).collect();
        return format!("a table with {}", keys.join(" and "));
    }
    match schema.get("type").and_then(Value::as_str) {
        Some(t) => json_type_name(t).to_string(),
        None => "a value".to_string(),
    }
}

/// The property names a table schema allows.
fn property_names(root: &Value, schema: &Value) -> Vec<String> {
    resolve(root, schema)
        .get("properties")
        .and_then(Value::as_object)
        .map_or_else(Vec::new, |p| p.keys().cloned().collect())
}

fn json_type_name(t: &str) -> &'static str {
    match t {
        "integer" => "an integer",
        "number" => "a number",
        "string" => "a string",
        "boolean" => "a boolean",
        "array" => "an array",
        "object" => "a table",
        _ => "",
    }
}

/// A JSON value as a user would write it in TOML.
fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("`{s}`"),
        other => other.to_string(),
    }
}

/// `` `a`, `b`, `c` ``.
fn list(items: &[String]) -> String {
    items.iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", ")
}

/// The candidate closest to `word`, if it is close enough to be a likely typo.
pub fn closest<'c>(word: &str, candidates: impl Iterator<Item = &'c str>) -> Option<&'c str> {
    let lower = word.to_lowercase();
    candidates
        .map(|c| (c, strsim::normalized_damerau_levenshtein(&lower, &c.to_lowercase())))
        .filter(|(_, score)| *score >= 0.6)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _)| c)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn closest_finds_typos_only() {
        let keys = ["batch_sizes", "precisions", "topologies"];
        assert_eq!(closest("batch_szie", keys.iter().copied()), Some("batch_sizes"));
        assert_eq!(closest("PRECISIONS", keys.iter().copied()), Some("precisions"));
        assert_eq!(closest("warmup", keys.iter().copied()), None);
    }
}
