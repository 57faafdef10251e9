//! Loading spec text: bytes -> UTF-8 -> TOML with spans -> a spanned [`Node`] tree -> JSON for the schema;
//! and the way back, from a field path to the line, column and snippet a diagnostic shows.
//!
//! Nothing here panics on any input: size, encoding, nesting depth and number ranges are checked before
//! anything else looks at the document.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::diagnostics::{Diagnostic, Snippet};
use super::path::FieldPath;

/// Largest spec file read, in bytes; real specs are a few kilobytes.
pub const MAX_SPEC_BYTES: usize = 1 << 20;
/// Deepest nesting of tables and arrays accepted; the deepest real spec value is 4 levels down.
pub const MAX_DEPTH: usize = 16;
/// Most syntax errors reported for one file (later ones are usually consequences of the first).
const MAX_SYNTAX_ERRORS: usize = 8;
/// Longest snippet shown, in characters.
const MAX_SNIPPET_CHARS: usize = 100;

/// Where a value was written: in the file, or in the n-th `--set` override.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The spec file.
    File,
    /// The `--set` override with this index.
    Override(usize),
}

/// A byte range in the file or in an override's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// Which text the range is in.
    pub origin: Origin,
    /// Byte range.
    pub range: Range<usize>,
}

impl Span {
    /// A span in the spec file.
    pub fn file(range: Range<usize>) -> Self {
        Self { origin: Origin::File, range }
    }
}

/// A TOML value with where it was written.
#[derive(Debug, Clone)]
pub struct Node {
    /// Where the value was written (for a table: its header or first key).
    pub span: Span,
    /// The value.
    pub kind: NodeKind,
}

/// The kinds of TOML values.
#[derive(Debug, Clone)]
pub enum NodeKind {
    /// A string.
    String(String),
    /// An integer, as written (`value` is `None` when it does not fit in 128 bits).
    Integer {
        /// The value, if representable.
        value: Option<i128>,
        /// The digits as written, with the radix prefix.
        text: String,
    },
    /// A float, as written.
    Float(String),
    /// A boolean.
    Boolean(bool),
    /// A date and/or time.
    Datetime(String),
    /// An array.
    Array(Vec<Node>),
    /// A table, keys in the parser's order.
    Table(Vec<Entry>),
    /// A value already reported as unusable (too deeply nested).
    Invalid,
}

/// A key and its value in a table.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// Where the key was written.
    pub key_span: Span,
    /// The value.
    pub value: Node,
}

impl Node {
    /// TOML's name of this value's type, with an article, for messages (`an integer`).
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            NodeKind::String(_) => "a string",
            NodeKind::Integer { .. } => "an integer",
            NodeKind::Float(_) => "a float",
            NodeKind::Boolean(_) => "a boolean",
            NodeKind::Datetime(_) => "a datetime",
            NodeKind::Array(_) => "an array",
            NodeKind::Table(_) => "a table",
            NodeKind::Invalid => "an invalid value",
        }
    }

    /// The entries of a table (empty for other values).
    pub fn entries(&self) -> &[Entry] {
        match &self.kind {
            NodeKind::Table(entries) => entries,
            _ => &[],
        }
    }
}

/// A problem found while loading, with its place.
#[derive(Debug, Clone)]
pub struct LoadProblem {
    /// Where.
    pub span: Span,
    /// Field path.
    pub path: FieldPath,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: Option<String>,
}

/// The texts diagnostics point into: the spec file and the `--set` overrides.
#[derive(Debug, Clone)]
pub struct Sources {
    file: String,
    text: String,
    line_starts: Vec<usize>,
    overrides: Vec<String>,
}

impl Sources {
    /// Sources for the file named `file` (as the user wrote it) holding `text`.
    pub fn new(file: impl Into<String>, text: impl Into<String>) -> Self {
        let text = text.into();
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Self { file: file.into(), text, line_starts, overrides: Vec::new() }
    }

    /// Register the text of each `--set` override (`key=value`), in order.
    pub fn with_overrides(mut self, overrides: Vec<String>) -> Self {
        self.overrides = overrides;
        self
    }

    /// The file name as given.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The file's text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// A diagnostic located at `span`, about the value at `path`.
    pub fn diagnostic(&self, span: &Span, path: &FieldPath, message: impl Into<String>) -> Diagnostic {
        let (file, text, line_start, line) = match span.origin {
            Origin::File => {
                let offset = floor_char_boundary(&self.text, span.range.start.min(self.text.len()));
                let line_index = self.line_starts.partition_point(|&s| s <= offset).saturating_sub(1);
                let start = self.line_starts.get(line_index).copied().unwrap_or(0);
                (self.file.clone(), self.text.as_str(), start, Some(line_index + 1))
            }
            Origin::Override(i) => {
                let text = self.overrides.get(i).map_or("", String::as_str);
                (format!("--set {text}"), text, 0, None)
            }
        };
        let mut d = Diagnostic::error(file, message);
        d.path = path.to_string();
        let (column, snippet) = snippet_at(text, line_start, span.range.clone());
        d.line = line;
        d.column = Some(column);
        d.snippet = Some(snippet);
        d
    }
}

/// The largest char boundary at or before `i`.
fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The column of `range.start` and the snippet of its line, starting at byte `line_start` of `text`.
fn snippet_at(text: &str, line_start: usize, range: Range<usize>) -> (usize, Snippet) {
    let line_start = floor_char_boundary(text, line_start.min(text.len()));
    let rest = &text[line_start..];
    let line = rest.split('\n').next().unwrap_or("").trim_end_matches('\r');
    let start = floor_char_boundary(text, range.start.clamp(line_start, line_start + line.len())) - line_start;
    let end = floor_char_boundary(text, range.end.clamp(line_start + start, line_start + line.len())) - line_start;
    let chars: Vec<char> = line.chars().map(printable).collect();
    let col = line[..start].chars().count();
    let len = line[start..end].chars().count().max(1);
    let column = col + 1;
    if chars.len() <= MAX_SNIPPET_CHARS {
        return (column, Snippet { text: chars.into_iter().collect(), start: column, len });
    }
    let from = col.saturating_sub(MAX_SNIPPET_CHARS / 3);
    let to = (from + MAX_SNIPPET_CHARS).min(chars.len());
    let mut shown = String::new();
    if from > 0 {
        shown.push('…');
    }
    shown.extend(&chars[from..to]);
    if to < chars.len() {
        shown.push('…');
    }
    let start_in_shown = col - from + usize::from(from > 0) + 1;
    let len = len.min(to.saturating_sub(col)).max(1);
    (column, Snippet { text: shown, start: start_in_shown, len })
}

/// Replace characters that would garble a terminal (or move the caret) by visible ones.
fn printable(c: char) -> char {
    match c {
        '\t' => ' ',
        c if c.is_control() => char::REPLACEMENT_CHARACTER,
        c => c,
    }
}

/// Decode spec bytes: reject oversized files and invalid UTF-8 with a located diagnostic.
pub fn decode(file: &str, bytes: &[u8]) -> Result<String, Box<Diagnostic>> {
    if bytes.len() > MAX_SPEC_BYTES {
        return Err(Box::new(
            Diagnostic::error(
                file,
                format!("the file is larger than {MAX_SPEC_BYTES} bytes, the most a spec may hold"),
            )
            .hint("is this really a spec file? specs are a few kilobytes of TOML"),
        ));
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.to_string()),
        Err(e) => {
            let lossy = String::from_utf8_lossy(bytes).into_owned();
            let offset = e.valid_up_to();
            let sources = Sources::new(file, lossy);
            let span = Span::file(offset..offset + 1);
            let d = sources
                .diagnostic(
                    &span,
                    &FieldPath::root(),
                    format!("the file is not valid UTF-8 (invalid byte 0x{:02x})", bytes[offset]),
                )
                .expected("TOML text encoded as UTF-8")
                .hint("specs are TOML text files; re-save the file as UTF-8");
            Err(Box::new(d))
        }
    }
}

/// Parse TOML text into a spanned tree. Syntax errors (several, if the parser can recover) come back as
/// diagnostics; problems with individual values (too deep, datetimes) as [`LoadProblem`]s next to the tree.
pub fn parse(sources: &Sources, text: &str, origin: Origin) -> Result<(Node, Vec<LoadProblem>), Vec<Diagnostic>> {
    let (table, errors) = DeTable::parse_recoverable(text);
    if !errors.is_empty() {
        let mut out = Vec::new();
        for e in errors.iter().take(MAX_SYNTAX_ERRORS) {
            let range = e.span().unwrap_or(0..0);
            let message = e.message().lines().next().unwrap_or("invalid TOML").trim().to_string();
            let d = sources.diagnostic(
                &Span { origin, range },
                &FieldPath::root(),
                format!("TOML syntax error: {message}"),
            );
            out.push(d.hint("see https://toml.io for the syntax; strings need quotes, tables are written `[name]`"));
        }
        return Err(out);
    }
    let span = table.span();
    let root = Spanned::new(span, DeValue::Table(table.into_inner()));
    let mut problems = Vec::new();
    let node = convert(&root, origin, &FieldPath::root(), 0, &mut problems);
    Ok((node, problems))
}

/// Parse one TOML value (the right-hand side of a `--set`), if it is one.
pub fn parse_value(text: &str, origin: Origin) -> Option<(Node, Vec<LoadProblem>)> {
    let value = DeValue::parse(text).ok()?;
    let mut problems = Vec::new();
    let node = convert(&value, origin, &FieldPath::root(), 1, &mut problems);
    Some((node, problems))
}

fn convert(
    value: &Spanned<DeValue<'_>>,
    origin: Origin,
    path: &FieldPath,
    depth: usize,
    problems: &mut Vec<LoadProblem>,
) -> Node {
    let span = Span { origin, range: value.span() };
    if depth > MAX_DEPTH {
        problems.push(LoadProblem {
            span: span.clone(),
            path: path.clone(),
            message: format!("values are nested more than {MAX_DEPTH} levels deep"),
            hint: Some("no spec field nests that deep; check the brackets".into()),
        });
        return Node { span, kind: NodeKind::Invalid };
    }
    let kind = match value.get_ref() {
        DeValue::String(s) => NodeKind::String(s.to_string()),
        DeValue::Integer(i) => {
            let value = i128::from_str_radix(i.as_str(), i.radix()).ok();
            NodeKind::Integer { value, text: i.to_string() }
        }
        DeValue::Float(f) => NodeKind::Float(f.as_str().to_string()),
        DeValue::Boolean(b) => NodeKind::Boolean(*b),
        DeValue::Datetime(d) => {
            problems.push(LoadProblem {
                span: span.clone(),
                path: path.clone(),
                message: format!("unexpected datetime `{d}`"),
                hint: Some("no spec field is a date or time; if you meant text, put it in quotes".into()),
            });
            NodeKind::Datetime(d.to_string())
        }
        DeValue::Array(items) => NodeKind::Array(
            items.iter().enumerate().map(|(i, v)| convert(v, origin, &path.index(i), depth + 1, problems)).collect(),
        ),
        DeValue::Table(table) => {
            let mut entries: Vec<Entry> = table
                .iter()
                .map(|(k, v)| Entry {
                    key: k.get_ref().to_string(),
                    key_span: Span { origin, range: k.span() },
                    value: convert(v, origin, &path.key(k.get_ref().to_string()), depth + 1, problems),
                })
                .collect();
            entries.sort_by_key(|e| e.key_span.range.start);
            NodeKind::Table(entries)
        }
    };
    Node { span, kind }
}

/// The JSON form of a document, for the schema validator, and the values that could not be represented.
#[derive(Debug)]
pub struct JsonForm {
    /// The document as JSON (unrepresentable values become `null`).
    pub value: serde_json::Value,
    /// Values that could not be represented (reported here, so schema errors about them are suppressed).
    pub problems: Vec<LoadProblem>,
    /// Paths whose value is `null` because of a problem already reported.
    pub poisoned: Vec<FieldPath>,
}

/// Convert a document to JSON.
pub fn to_json(root: &Node) -> JsonForm {
    let mut form = JsonForm { value: serde_json::Value::Null, problems: Vec::new(), poisoned: Vec::new() };
    form.value = json_of(root, &FieldPath::root(), &mut form);
    form
}

fn json_of(node: &Node, path: &FieldPath, form: &mut JsonForm) -> serde_json::Value {
    use serde_json::Value;
    let mut problem = |message: String, hint: &str| {
        form.problems.push(LoadProblem {
            span: node.span.clone(),
            path: path.clone(),
            message,
            hint: Some(hint.to_string()),
        });
    };
    let value = match &node.kind {
        NodeKind::String(s) => Value::String(s.clone()),
        NodeKind::Boolean(b) => Value::Bool(*b),
        NodeKind::Integer { value, text } => match value.and_then(|v| i64::try_from(v).ok()) {
            Some(v) => Value::from(v),
            None => {
                problem(
                    format!("integer `{text}` is out of range"),
                    &format!("TOML integers lie between {} and {}", i64::MIN, i64::MAX),
                );
                Value::Null
            }
        },
        NodeKind::Float(text) => match text.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
            Some(n) => Value::Number(n),
            None => {
                problem(format!("`{text}` is not a finite number"), "use a finite number such as `0.5` or `1e-3`");
                Value::Null
            }
        },
        NodeKind::Datetime(_) | NodeKind::Invalid => Value::Null,
        NodeKind::Array(items) => {
            Value::Array(items.iter().enumerate().map(|(i, n)| json_of(n, &path.index(i), form)).collect())
        }
        NodeKind::Table(entries) => {
            let mut map = serde_json::Map::new();
            for e in entries {
                let v = json_of(&e.value, &path.key(e.key.clone()), form);
                map.insert(e.key.clone(), v);
            }
            Value::Object(map)
        }
    };
    if value.is_null() {
        form.poisoned.push(path.clone());
    }
    value
}

/// Where a path points in a document: the value's span, the key's span, and whether the path exists.
#[derive(Debug, Clone)]
pub struct Location {
    /// Span of the value at the path, or of the deepest existing table/array above it.
    pub span: Span,
    /// Span of the key naming the value, when the path ends in an existing key.
    pub key_span: Option<Span>,
    /// True when the whole path exists.
    pub exact: bool,
}

/// Find where `path` points in the document rooted at `root`.
pub fn locate(root: &Node, path: &FieldPath) -> Location {
    use super::path::Segment;
    let mut node = root;
    let mut key_span = None;
    for segment in &path.0 {
        let next = match (&node.kind, segment) {
            (NodeKind::Table(entries), Segment::Key(k)) => {
                entries.iter().find(|e| &e.key == k).map(|e| (&e.value, Some(e.key_span.clone())))
            }
            (NodeKind::Table(entries), Segment::Index(i)) => {
                let k = i.to_string();
                entries.iter().find(|e| e.key == k).map(|e| (&e.value, Some(e.key_span.clone())))
            }
            (NodeKind::Array(items), Segment::Index(i)) => items.get(*i).map(|n| (n, None)),
            _ => None,
        };
        match next {
            Some((n, k)) => {
                node = n;
                key_span = k;
            }
            None => return Location { span: node.span.clone(), key_span: None, exact: false },
        }
    }
    Location { span: node.span.clone(), key_span, exact: true }
}

/// The node at `path`, if it exists.
pub fn get<'a>(root: &'a Node, path: &FieldPath) -> Option<&'a Node> {
    use super::path::Segment;
    let mut node = root;
    for segment in &path.0 {
        node = match (&node.kind, segment) {
            (NodeKind::Table(entries), Segment::Key(k)) => &entries.iter().find(|e| &e.key == k)?.value,
            (NodeKind::Array(items), Segment::Index(i)) => items.get(*i)?,
            _ => return None,
        };
    }
    Some(node)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn load(text: &str) -> (Sources, Node) {
        let sources = Sources::new("t.toml", text);
        let (node, problems) = parse(&sources, text, Origin::File).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        (sources, node)
    }

    #[test]
    fn locates_keys_values_and_missing_paths() {
        let text = "version = 1\n\n[sweep]\nbatch_sizes = [1, 2]\n";
        let (sources, root) = load(text);
        let loc = locate(&root, &FieldPath::keys(&["sweep", "batch_sizes"]).index(1));
        assert!(loc.exact);
        let d = sources.diagnostic(&loc.span, &FieldPath::root(), "x");
        assert_eq!((d.line, d.column), (Some(4), Some(19)));
        let missing = locate(&root, &FieldPath::keys(&["sweep", "precisions"]));
        assert!(!missing.exact);
        let d = sources.diagnostic(&missing.span, &FieldPath::root(), "x");
        assert_eq!(d.line, Some(3));
        assert_eq!(d.snippet.unwrap().text, "[sweep]");
    }

    #[test]
    fn syntax_errors_are_located() {
        let sources = Sources::new("t.toml", "a = 1\nb = = 2\n");
        let errs = parse(&sources, sources.text(), Origin::File).unwrap_err();
        assert_eq!(errs[0].line, Some(2));
        assert!(errs[0].message.starts_with("TOML syntax error"));
    }

    #[test]
    fn huge_integers_and_nan_are_problems_not_panics() {
        let (_, root) = load("a = 123456789012345678901234567890123456789012345\nb = nan\nc = 9223372036854775807\n");
        let form = to_json(&root);
        assert_eq!(form.problems.len(), 2);
        assert_eq!(form.value["c"], serde_json::json!(i64::MAX));
        assert_eq!(form.poisoned.len(), 2);
    }

    #[test]
    fn deep_nesting_is_cut() {
        let text = format!("a = {}1{}\n", "[".repeat(40), "]".repeat(40));
        let sources = Sources::new("t.toml", text.clone());
        let (_, problems) = parse(&sources, &text, Origin::File).unwrap();
        assert_eq!(problems.len(), 1);
        assert!(problems[0].message.contains("nested"));
    }

    #[test]
    fn not_utf8_is_located() {
        let d = decode("t.toml", b"a = 1\nb = \"\xff\"\n").unwrap_err();
        assert_eq!((d.line, d.column), (Some(2), Some(6)));
    }

    #[test]
    fn long_lines_are_windowed_and_control_chars_hidden() {
        let line = format!("x = \"{}\u{1b}\" y", "a".repeat(300));
        let sources = Sources::new("t.toml", line.clone());
        let d = sources.diagnostic(&Span::file(line.len() - 1..line.len()), &FieldPath::root(), "m");
        let s = d.snippet.unwrap();
        assert!(s.text.chars().count() <= MAX_SNIPPET_CHARS + 2);
        assert!(!s.text.contains('\u{1b}'));
        assert_eq!(s.text.chars().nth(s.start - 1), Some('y'));
    }
}
