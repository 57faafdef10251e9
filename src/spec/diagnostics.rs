//! Located diagnostics about specs: the [`Diagnostic`] record, and its text (rustc style) and JSON renderings, and
//! how many one file reports at most.

use std::fmt::Write as _;

use serde::Serialize;

/// Most diagnostics reported for one file; past this the file is too broken for more to help.
pub const MAX_DIAGNOSTICS: usize = 50;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The spec is invalid.
    Error,
    /// The spec is valid but probably not what was meant.
    Warning,
}

impl Severity {
    /// Name as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// The offending source line of a diagnostic, and which part of it to underline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snippet {
    /// The line as written (possibly shortened around the underlined part, marked with `…`).
    pub text: String,
    /// 1-based character column in `text` where the underline starts.
    pub start: usize,
    /// Characters underlined (at least 1).
    pub len: usize,
}

/// One problem found in a spec (or in a `--set` override), with where it is and how to fix it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostic {
    /// The file as the user named it, or `--set <override>` for a command-line override.
    pub file: String,
    /// 1-based line; `None` for command-line overrides and whole-file problems without a position.
    pub line: Option<usize>,
    /// 1-based character column; `None` when there is no position.
    pub column: Option<usize>,
    /// Field path of the offending value (`sweep.batch_sizes[1]`); empty for the whole file.
    pub path: String,
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong.
    pub message: String,
    /// What would have been accepted.
    pub expected: Option<String>,
    /// How to fix it.
    pub hint: Option<String>,
    /// The offending line with the underlined part.
    pub snippet: Option<Snippet>,
}

impl Diagnostic {
    /// An error about `file` with no position yet.
    pub fn error(file: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            file: file.into(),
            line: None,
            column: None,
            path: String::new(),
            severity: Severity::Error,
            message: message.into(),
            expected: None,
            hint: None,
            snippet: None,
        }
    }

    /// The same diagnostic as a warning.
    pub fn warning(mut self) -> Self {
        self.severity = Severity::Warning;
        self
    }

    /// Set what would have been accepted.
    pub fn expected(mut self, expected: impl Into<String>) -> Self {
        self.expected = Some(expected.into());
        self
    }

    /// Set how to fix it.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Set an optional hint.
    pub fn maybe_hint(mut self, hint: Option<String>) -> Self {
        if hint.is_some() {
            self.hint = hint;
        }
        self
    }

    /// True for errors.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Sort key: command-line overrides last, then by line and column.
    fn order_key(&self) -> (bool, usize, usize) {
        (self.line.is_none(), self.line.unwrap_or(0), self.column.unwrap_or(0))
    }
}

/// Sort diagnostics into source order (stable, so equal positions keep the order they were found in).
pub fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by_key(|d| d.order_key());
}

/// Render diagnostics as text, rustc style, without colour:
///
/// ```text
/// error: unknown key `batch_szie` in [sweep]
///   --> specs/x.toml:7:1
///    |
///  7 | batch_szie = [32, 64]
///    | ^^^^^^^^^^
///    = field: sweep.batch_szie
///    = expected: one of `batch_sizes`, `precisions`, `topologies`
///    = hint: did you mean `batch_sizes`?
/// ```
pub fn render_text(diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diagnostics {
        render_one(&mut out, d);
        out.push('\n');
    }
    out
}

fn render_one(out: &mut String, d: &Diagnostic) {
    let gutter = d.line.map_or(1, |l| l.to_string().len());
    let pad = " ".repeat(gutter);
    let _ = writeln!(out, "{}: {}", d.severity.as_str(), d.message);
    match (d.line, d.column) {
        (Some(line), Some(column)) => {
            let _ = writeln!(out, "{pad}--> {}:{line}:{column}", d.file);
        }
        (None, Some(column)) => {
            let _ = writeln!(out, "{pad}--> {} (column {column})", d.file);
        }
        _ => {
            let _ = writeln!(out, "{pad}--> {}", d.file);
        }
    }
    if let Some(snippet) = &d.snippet {
        let number = d.line.map_or_else(String::new, |l| l.to_string());
        let _ = writeln!(out, "{pad} |");
        let _ = writeln!(out, "{number:>gutter$} | {}", snippet.text);
        let caret_pad = " ".repeat(snippet.start.saturating_sub(1));
        let _ = writeln!(out, "{pad} | {caret_pad}{}", "^".repeat(snippet.len.max(1)));
    }
    if !d.path.is_empty() {
        let _ = writeln!(out, "{pad} = field: {}", d.path);
    }
    if let Some(expected) = &d.expected {
        let _ = writeln!(out, "{pad} = expected: {expected}");
    }
    if let Some(hint) = &d.hint {
        let _ = writeln!(out, "{pad} = hint: {hint}");
    }
}

/// The result of checking one file, as `--format json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    /// The file as the user named it.
    pub file: String,
    /// True when there is no error (warnings allowed).
    pub valid: bool,
    /// The benchmark name, when the spec is valid.
    pub name: Option<String>,
    /// SHA-256 of the canonical spec, when valid.
    pub sha256: Option<String>,
    /// Number of runs the spec expands to, when valid.
    pub runs: Option<usize>,
    /// `hardware` for a hardware profile (`trainbench validate` checks those too); absent for specs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    /// Every problem found, in source order.
    pub diagnostics: Vec<Diagnostic>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sample() -> Diagnostic {
        let mut d = Diagnostic::error("specs/x.toml", "unknown key `batch_szie` in [sweep]")
            .expected("one of `batch_sizes`, `precisions`, `topologies`")
            .hint("did you mean `batch_sizes`?");
        d.line = Some(12);
        d.column = Some(1);
        d.path = "sweep.batch_szie".into();
        d.snippet = Some(Snippet { text: "batch_szie = [32, 64]".into(), start: 1, len: 10 });
        d
    }

    #[test]
    fn text_rendering_has_location_caret_and_notes() {
        let text = render_text(&[sample()]);
        let expected = "error: unknown key `batch_szie` in [sweep]\n  --> specs/x.toml:12:1\n   |\n12 | \
            batch_szie = [32, 64]\n   | ^^^^^^^^^^\n   = field: sweep.batch_szie\n   = expected: one of \
            `batch_sizes`, `precisions`, `topologies`\n   = hint: did you mean `batch_sizes`?\n\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn overrides_sort_last_and_render_without_line() {
        let mut o = Diagnostic::error("--set run.iterations=x", "bad");
        o.column = Some(16);
        let mut all = vec![o, sample()];
        sort(&mut all);
        assert_eq!(all[0].line, Some(12));
        let text = render_text(&all[1..]);
        assert!(text.contains("--> --set run.iterations=x (column 16)"), "{text}");
    }

    #[test]
    fn json_has_every_field() {
        let v = serde_json::to_value(sample()).unwrap();
        for key in ["file", "line", "column", "path", "severity", "message", "expected", "hint", "snippet"] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        assert_eq!(v["severity"], "error");
    }
}
