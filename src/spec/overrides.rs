//! `--set key.path=value` overrides, applied to the spec's TOML tree before validation, so real specs can be
//! run at smoke scale (`--set run.iterations=5 --set sweep.batch_sizes=[2,4]`).
//!
//! The value is parsed as a TOML value and, when it is not one, taken as a string (`--set topology.device=cpu`).
//! Problems with an override (and schema errors in the values it sets) point at the override, not the file.

use super::diagnostics::Diagnostic;
use super::load::{self, Entry, LoadProblem, Node, NodeKind, Origin, Sources, Span};
use super::path::{FieldPath, Segment};

/// One parsed `--set` override.
#[derive(Debug, Clone)]
pub struct Override {
    /// The argument as given (`run.iterations=5`).
    pub text: String,
    /// The path it sets.
    pub path: FieldPath,
    /// Byte range of the key part in `text`.
    key_range: std::ops::Range<usize>,
    /// The value, spanned in `text`.
    value: Node,
    /// Problems of the value itself (a datetime, too deep).
    problems: Vec<LoadProblem>,
}

/// A list of parsed overrides, in command-line order (later ones win).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    list: Vec<Override>,
}

impl Overrides {
    /// No overrides.
    pub fn none() -> Self {
        Self::default()
    }

    /// Parse `--set` arguments; every malformed one is reported.
    pub fn parse(args: &[String]) -> Result<Self, Vec<Diagnostic>> {
        let texts: Vec<String> = args.to_vec();
        let sources = Sources::new("", "").with_overrides(texts.clone());
        let mut list = Vec::new();
        let mut errors = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            match parse_one(i, text) {
                Ok(o) => list.push(o),
                Err((range, message, hint)) => {
                    let span = Span { origin: Origin::Override(i), range };
                    errors.push(sources.diagnostic(&span, &FieldPath::root(), message).hint(hint));
                }
            }
        }
        if errors.is_empty() { Ok(Self { list }) } else { Err(errors) }
    }

    /// The override texts, in order (recorded with results so a run can be reproduced).
    pub fn texts(&self) -> Vec<String> {
        self.list.iter().map(|o| o.text.clone()).collect()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Apply the overrides to a document, in order. Returns the problems found (located in the overrides).
    pub fn apply(&self, root: &mut Node) -> Vec<LoadProblem> {
        let mut problems = Vec::new();
        for o in &self.list {
            problems.extend(o.problems.iter().cloned().map(|mut p| {
                p.path = FieldPath(o.path.0.iter().cloned().chain(p.path.0).collect());
                p
            }));
            if let Err(p) = apply_one(root, o) {
                problems.push(p);
            }
        }
        problems
    }
}

type ParseError = (std::ops::Range<usize>, String, String);

fn parse_one(index: usize, text: &str) -> Result<Override, ParseError> {
    let origin = Origin::Override(index);
    let Some(eq) = text.find('=') else {
        return Err((
            0..text.len(),
            format!("override `{text}` has no `=`"),
            "write `--set key.path=value`, e.g. `--set run.iterations=5`".into(),
        ));
    };
    let key_text = &text[..eq];
    let mut path = Vec::new();
    let mut offset = 0;
    for raw in key_text.split('.') {
        let trimmed = raw.trim();
        let start = offset + (raw.len() - raw.trim_start().len());
        if trimmed.is_empty() || !super::path::is_bare_key(trimmed) {
            let range = if trimmed.is_empty() { offset..offset + raw.len() } else { start..start + trimmed.len() };
            return Err((
                range,
                format!("invalid key `{trimmed}` in override `{text}`"),
                "keys are letters, digits, `_` and `-`, separated by `.` (array positions are numbers: `sweep.topologies.0.nodes`)".into(),
            ));
        }
        path.push(match trimmed.parse::<usize>() {
            Ok(i) => Segment::Index(i),
            Err(_) => Segment::Key(trimmed.to_string()),
        });
        offset += raw.len() + 1;
    }
    let value_start = eq + 1;
    let value_text = &text[value_start..];
    let (mut value, problems) = match load::parse_value(value_text, origin) {
        Some(parsed) => parsed,
        None => {
            let s = value_text.trim();
            (
                Node { span: Span { origin, range: 0..value_text.len() }, kind: NodeKind::String(s.to_string()) },
                Vec::new(),
            )
        }
    };
    shift(&mut value, value_start);
    let mut problems = problems;
    for p in &mut problems {
        p.span.range = p.span.range.start + value_start..p.span.range.end + value_start;
    }
    Ok(Override { text: text.to_string(), path: FieldPath(path), key_range: 0..eq, value, problems })
}

/// Move the spans of a parsed value (relative to the value text) to positions in the whole override.
fn shift(node: &mut Node, by: usize) {
    node.span.range = node.span.range.start + by..node.span.range.end + by;
    match &mut node.kind {
        NodeKind::Array(items) => items.iter_mut().for_each(|n| shift(n, by)),
        NodeKind::Table(entries) => entries.iter_mut().for_each(|e| {
            e.key_span.range = e.key_span.range.start + by..e.key_span.range.end + by;
            shift(&mut e.value, by);
        }),
        _ => {}
    }
}

fn apply_one(root: &mut Node, o: &Override) -> Result<(), LoadProblem> {
    let origin = o.value.span.origin;
    let key_span = Span { origin, range: o.key_range.clone() };
    let problem = |at: &FieldPath, message: String, hint: &str| LoadProblem {
        span: key_span.clone(),
        path: at.clone(),
        message,
        hint: Some(hint.to_string()),
    };
    let Some((last, parents)) = o.path.0.split_last() else {
        return Err(problem(&FieldPath::root(), "an override needs a key".into(), "write `--set key.path=value`"));
    };
    let mut node = root;
    let mut here = FieldPath::root();
    for segment in parents {
        let type_name = node.type_name();
        node = match (&mut node.kind, segment) {
            (NodeKind::Table(entries), seg) => {
                let key = segment_key(seg);
                here = here.key(key.clone());
                let pos = match entries.iter().position(|e| e.key == key) {
                    Some(p) => p,
                    None => {
                        entries.push(Entry {
                            key,
                            key_span: key_span.clone(),
                            value: Node { span: key_span.clone(), kind: NodeKind::Table(Vec::new()) },
                        });
                        entries.len() - 1
                    }
                };
                &mut entries[pos].value
            }
            (NodeKind::Array(items), Segment::Index(i)) => {
                let len = items.len();
                here = here.index(*i);
                match items.get_mut(*i) {
                    Some(n) => n,
                    None => {
                        return Err(problem(
                            &here,
                            format!("`{}` has {len} entries; there is no entry {i}", here.parent()),
                            "array positions start at 0",
                        ));
                    }
                }
            }
            _ => {
                return Err(problem(
                    &here,
                    format!("cannot set `{}`: `{here}` is {type_name}, not a table", o.path),
                    "override a field inside a table, or the whole value",
                ));
            }
        };
    }
    let type_name = node.type_name();
    let value = o.value.clone();
    match (&mut node.kind, last) {
        (NodeKind::Table(entries), seg) => {
            let key = segment_key(seg);
            match entries.iter_mut().find(|e| e.key == key) {
                Some(e) => e.value = value,
                None => entries.push(Entry { key, key_span: key_span.clone(), value }),
            }
            Ok(())
        }
        (NodeKind::Array(items), Segment::Index(i)) => {
            let len = items.len();
            match items.get_mut(*i) {
                Some(n) => *n = value,
                None if *i == len => items.push(value),
                None => {
                    return Err(problem(
                        &here,
                        format!("`{here}` has {len} entries; cannot set entry {i}"),
                        "array positions start at 0; use the next free position to append",
                    ));
                }
            }
            Ok(())
        }
        _ => Err(problem(
            &here,
            format!("cannot set `{}`: `{here}` is {type_name}, not a table", o.path),
            "override a field inside a table, or the whole value",
        )),
    }
}

fn segment_key(segment: &Segment) -> String {
    match segment {
        Segment::Key(k) => k.clone(),
        Segment::Index(i) => i.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::spec::load::{parse, to_json};

    fn doc(text: &str) -> Node {
        parse(&Sources::new("t", text), text, Origin::File).unwrap().0
    }

    fn set(args: &[&str]) -> Overrides {
        Overrides::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn sets_scalars_arrays_and_new_tables() {
        let mut root = doc("[run]\niterations = 50\n[[sweep.topologies]]\nnodes = 1\n");
        let o = set(&[
            "run.iterations=5",
            "sweep.batch_sizes=[2, 4]",
            "topology.device=cuda:0",
            "sweep.topologies.0.nodes=2",
        ]);
        assert!(o.apply(&mut root).is_empty());
        let json = to_json(&root).value;
        assert_eq!(json["run"]["iterations"], 5);
        assert_eq!(json["sweep"]["batch_sizes"], serde_json::json!([2, 4]));
        assert_eq!(json["topology"]["device"], "cuda:0");
        assert_eq!(json["sweep"]["topologies"][0]["nodes"], 2);
    }

    #[test]
    fn malformed_overrides_point_at_the_argument() {
        let errs = Overrides::parse(&["run.iterations".to_string(), "run..x=1".to_string()]).unwrap_err();
        assert_eq!(errs.len(), 2);
        assert_eq!(errs[0].file, "--set run.iterations");
        assert_eq!(errs[0].line, None);
        assert_eq!(errs[1].column, Some(5));
    }

    #[test]
    fn setting_inside_a_scalar_is_a_problem_at_the_override() {
        let mut root = doc("[run]\niterations = 50\n");
        let problems = set(&["run.iterations.x=1"]).apply(&mut root);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].span.origin, Origin::Override(0));
        assert!(problems[0].message.contains("is an integer"), "{}", problems[0].message);
    }

    #[test]
    fn value_spans_are_in_the_override_text() {
        let mut root = doc("");
        set(&["run.iterations=abc def"]).apply(&mut root);
        let n = load::get(&root, &FieldPath::keys(&["run", "iterations"])).unwrap();
        assert_eq!(n.span.range, 15..22);
        assert!(matches!(&n.kind, NodeKind::String(s) if s == "abc def"));
    }
}
