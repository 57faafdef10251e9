//! The tidy test: each rule of `ARCHITECTURE.md` that matters, checked over the source tree so that CI fails the
//! day one stops being true (rust-analyzer's `tidy.rs` is the model). Each rule names the section of the map it
//! governs; `ARCHITECTURE.md` names the check beside each rule.

mod file_shape;
mod import_circles;
mod linking;
mod op_matches;
mod signatures;

use std::path::{Path, PathBuf};

/// The workspace root: this crate's manifest folder, or `TIDY_ROOT` when set (`scripts/tidy_selfcheck.sh`
/// points a built test binary at another checkout with it).
pub(crate) fn root() -> &'static Path {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        std::env::var_os("TIDY_ROOT").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
    })
}

/// Every crate's `src/` folder: the root crate's and each library crate's under `crates/`.
pub(crate) fn source_roots() -> Vec<PathBuf> {
    let mut roots = vec![root().join("src")];
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .expect("crates/ is readable")
        .filter_map(|e| e.ok().map(|e| e.path().join("src")))
        .filter(|p| p.is_dir())
        .collect();
    crates.sort();
    roots.extend(crates);
    roots
}

/// Every `.rs` file under `dir`, sorted, skipping build outputs.
pub(crate) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if name != "target" && !name.to_string_lossy().starts_with('.') {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The Rust files the rules govern: every crate's `src/`, `tests/` and `examples/`, and the root `build.rs`.
pub(crate) fn governed_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["src", "tests"] {
        files.extend(rust_files(&root().join(dir)));
    }
    files.push(root().join("build.rs"));
    for krate in source_roots().iter().filter_map(|src| src.parent()).filter(|c| c != &root()) {
        for dir in ["src", "tests", "examples"] {
            files.extend(rust_files(&krate.join(dir)));
        }
        let build = krate.join("build.rs");
        if build.is_file() {
            files.push(build);
        }
    }
    files
}

/// `path` relative to the workspace root, for messages.
pub(crate) fn shown(path: &Path) -> String {
    path.strip_prefix(root()).unwrap_or(path).display().to_string()
}

/// Rust source with comments and the contents of string and char literals blanked out (line structure kept), so
/// that a rule reads code, never prose or text.
pub(crate) fn code_only(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            out.extend(std::iter::repeat_n(' ', end));
            i += end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |e| e + 2);
            out.extend(rest[..end].chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
            i += end;
        } else if let Some(len) = raw_string_len(rest) {
            out.extend(rest[..len].chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
            i += len;
        } else if rest.starts_with('"') {
            let mut j = 1;
            while j < rest.len() {
                match rest.as_bytes()[j] {
                    b'\\' => j += 2,
                    b'"' => break,
                    _ => j += 1,
                }
            }
            let end = (j + 1).min(rest.len());
            out.push('"');
            out.extend(rest[1..end.saturating_sub(1)].chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
            out.push('"');
            i += end;
        } else if let Some(len) = char_literal_len(rest) {
            out.push_str("' '");
            out.extend(std::iter::repeat_n(' ', len - 3));
            i += len;
        } else {
            let c = rest.chars().next().expect("not at the end");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The length of a raw string literal (`r"..."`, `r#"..."#`, `br"..."`) starting `text`, if one does.
fn raw_string_len(text: &str) -> Option<usize> {
    let after_b = text.strip_prefix('b').unwrap_or(text);
    let after_r = after_b.strip_prefix('r')?;
    let hashes = after_r.len() - after_r.trim_start_matches('#').len();
    let body = after_r[hashes..].strip_prefix('"')?;
    let close = format!("\"{}", "#".repeat(hashes));
    let end = body.find(&close)? + close.len();
    Some(text.len() - body.len() + end)
}

/// The length of a char literal (`'a'`, `'\n'`, `'\''`) starting `text`; lifetimes (`'a`) are not literals.
fn char_literal_len(text: &str) -> Option<usize> {
    let body = text.strip_prefix('\'')?;
    let mut chars = body.char_indices();
    let (_, first) = chars.next()?;
    let after = if first == '\\' {
        let (_, escaped) = chars.next()?;
        if escaped == 'u' { body.find('}')? + 1 } else { 1 + escaped.len_utf8() }
    } else {
        first.len_utf8()
    };
    (body[after..].starts_with('\'')).then_some(after + 2)
}
