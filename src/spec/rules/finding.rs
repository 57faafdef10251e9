//! [`Finding`]: one rule violation, where it is and how to fix it; what every rule returns.

use crate::spec::path::FieldPath;

/// One rule violation: where (the first of `paths` written in the spec is pointed at), what, and how to fix it.
#[derive(Debug, Clone)]
pub struct Finding {
    /// Candidate places, best first; the first one present in the document is shown.
    pub paths: Vec<FieldPath>,
    /// What is wrong.
    pub message: String,
    /// What would be accepted.
    pub expected: Option<String>,
    /// How to fix it.
    pub hint: Option<String>,
    /// A warning rather than an error.
    pub warning: bool,
}

impl Finding {
    /// A finding at `path` saying `message`.
    pub(crate) fn new(path: FieldPath, message: impl Into<String>) -> Self {
        Self { paths: vec![path], message: message.into(), expected: None, hint: None, warning: false }
    }
    /// Another candidate place, used when the first is not written in the spec.
    pub(crate) fn or_at(mut self, path: FieldPath) -> Self {
        self.paths.push(path);
        self
    }
    /// What would be accepted.
    pub(crate) fn expected(mut self, text: impl Into<String>) -> Self {
        self.expected = Some(text.into());
        self
    }
    /// How to fix it.
    pub(crate) fn hint(mut self, text: impl Into<String>) -> Self {
        self.hint = Some(text.into());
        self
    }
    /// Make it a warning rather than an error.
    pub(crate) fn warning(mut self) -> Self {
        self.warning = true;
        self
    }
}
