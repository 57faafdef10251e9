//! Field paths inside a spec (`sweep.batch_sizes[2]`): built from JSON pointers or by hand, shown to users.

use std::fmt;

/// One step of a [`FieldPath`]: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Segment {
    /// A key of a table.
    Key(String),
    /// A position in an array (0-based).
    Index(usize),
}

/// Where a value sits in a spec, from the top-level table down.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldPath(pub Vec<Segment>);

impl FieldPath {
    /// The path of the top-level table.
    pub fn root() -> Self {
        Self(Vec::new())
    }

    /// A path made of table keys only (`FieldPath::keys(&["run", "warmup"])`).
    pub fn keys(keys: &[&str]) -> Self {
        Self(keys.iter().map(|k| Segment::Key((*k).to_string())).collect())
    }

    /// This path extended by a key.
    pub fn key(&self, key: impl Into<String>) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Key(key.into()));
        Self(segments)
    }

    /// This path extended by an array index.
    pub fn index(&self, index: usize) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Index(index));
        Self(segments)
    }

    /// The path of the table or array holding this value (the root holds itself).
    pub fn parent(&self) -> Self {
        let mut segments = self.0.clone();
        segments.pop();
        Self(segments)
    }

    /// The last key of the path, if it ends in a key.
    pub fn last_key(&self) -> Option<&str> {
        match self.0.last() {
            Some(Segment::Key(k)) => Some(k),
            _ => None,
        }
    }

    /// True for the top-level table.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// True when `self` equals `prefix` or lies inside it.
    pub fn starts_with(&self, prefix: &FieldPath) -> bool {
        self.0.len() >= prefix.0.len() && self.0[..prefix.0.len()] == prefix.0[..]
    }

    /// Build a path from a JSON pointer (`/sweep/batch_sizes/2`), deciding between keys and indices by looking
    /// at the JSON document the pointer points into (a table key may well be made of digits).
    pub fn from_pointer(pointer: &str, document: &serde_json::Value) -> Self {
        let mut segments = Vec::new();
        let mut current = Some(document);
        for raw in pointer.split('/').skip(1) {
            let token = raw.replace("~1", "/").replace("~0", "~");
            match current {
                Some(serde_json::Value::Array(items)) => match token.parse::<usize>() {
                    Ok(i) => {
                        current = items.get(i);
                        segments.push(Segment::Index(i));
                    }
                    Err(_) => {
                        current = None;
                        segments.push(Segment::Key(token));
                    }
                },
                Some(serde_json::Value::Object(map)) => {
                    current = map.get(&token);
                    segments.push(Segment::Key(token));
                }
                _ => {
                    current = None;
                    segments.push(Segment::Key(token));
                }
            }
        }
        Self(segments)
    }

    /// How the table holding this path is written in TOML: `[sweep]`, `[[sweep.topologies]]` entry 2 is
    /// `sweep.topologies[1]`, the top level is `the top level`.
    pub fn table_display(&self) -> String {
        if self.is_root() {
            "the top level".to_string()
        } else if matches!(self.0.last(), Some(Segment::Index(_))) {
            format!("`{self}`")
        } else {
            format!("[{self}]")
        }
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(k) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    if is_bare_key(k) {
                        f.write_str(k)?;
                    } else {
                        write!(f, "{k:?}")?;
                    }
                }
                Segment::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// True when `key` can be written without quotes in TOML.
pub fn is_bare_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointer_uses_document_to_tell_indices_from_keys() {
        let doc = json!({"sweep": {"batch_sizes": [1, 2, 3]}, "t": {"0": {"x": 1}}});
        let p = FieldPath::from_pointer("/sweep/batch_sizes/2", &doc);
        assert_eq!(p.to_string(), "sweep.batch_sizes[2]");
        let q = FieldPath::from_pointer("/t/0/x", &doc);
        assert_eq!(q.0[1], Segment::Key("0".into()));
        assert_eq!(q.to_string(), "t.0.x");
    }

    #[test]
    fn odd_keys_are_quoted() {
        let p = FieldPath::keys(&["a", "b c", "d.e"]);
        assert_eq!(p.to_string(), r#"a."b c"."d.e""#);
        assert_eq!(FieldPath::root().table_display(), "the top level");
        assert_eq!(FieldPath::keys(&["sweep"]).table_display(), "[sweep]");
        assert_eq!(FieldPath::keys(&["sweep", "topologies"]).index(1).table_display(), "`sweep.topologies[1]`");
    }

    #[test]
    fn escaped_pointer_tokens() {
        let doc = json!({"a/b": {"c~d": 1}});
        let p = FieldPath::from_pointer("/a~1b/c~0d", &doc);
        assert_eq!(p.0, vec![Segment::Key("a/b".into()), Segment::Key("c~d".into())]);
    }
}
