//! The tidy test: each rule of `ARCHITECTURE.md` that matters, checked over the source tree so that CI fails the
//! day one stops being true (rust-analyzer's `tidy.rs` is the model). Each rule names the section of the map it
//! governs; `ARCHITECTURE.md` names the check beside each rule.

mod file_shape;
mod import_circles;
mod linking;
mod op_matches;
mod signatures;
mod test_files;

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

/// Rust source with comments and string and char literals blanked out (line structure kept), as text: what the
/// rules read, so that they see code, never prose.
pub(crate) fn code_only(text: &str) -> String {
    code_chars(text).into_iter().collect()
}

/// The source with comments, string literals and character literals replaced by spaces (newlines kept), so
/// that braces, `=>` and `Op::` inside them are not read as code and line numbers stay true.
pub(crate) fn code_chars(source: &str) -> Vec<char> {
    let chars: Vec<char> = source.chars().collect();
    let mut out = chars.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for slot in out.iter_mut().take(to.min(chars.len())).skip(from) {
            if *slot != '\n' {
                *slot = ' ';
            }
        }
    };
    let mut at = 0;
    while at < chars.len() {
        let here = chars[at];
        let next = chars.get(at + 1).copied();
        let previous_is_ident = at > 0 && is_ident(chars[at - 1]);
        if here == '/' && next == Some('/') {
            let end = (at..chars.len()).find(|&i| chars[i] == '\n').unwrap_or(chars.len());
            blank(&mut out, at, end);
            at = end;
        } else if here == '/' && next == Some('*') {
            let end = block_comment_end(&chars, at);
            blank(&mut out, at, end);
            at = end;
        } else if let Some(end) = raw_string_end(&chars, at).filter(|_| !previous_is_ident) {
            blank(&mut out, at, end);
            at = end;
        } else if here == '"' {
            let end = quoted_end(&chars, at, '"');
            blank(&mut out, at, end);
            at = end;
        } else if here == '\'' && char_literal(&chars, at) {
            let end = quoted_end(&chars, at, '\'');
            blank(&mut out, at, end);
            at = end;
        } else {
            at += 1;
        }
    }
    out
}

/// Whether `c` may be part of an identifier.
pub(crate) fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The index just past a (possibly nested) block comment opening at `start`.
fn block_comment_end(chars: &[char], start: usize) -> usize {
    let mut depth = 0usize;
    let mut at = start;
    while at + 1 < chars.len() {
        if chars[at] == '/' && chars[at + 1] == '*' {
            depth += 1;
            at += 2;
        } else if chars[at] == '*' && chars[at + 1] == '/' {
            depth -= 1;
            at += 2;
            if depth == 0 {
                return at;
            }
        } else {
            at += 1;
        }
    }
    chars.len()
}

/// The index just past a raw string (`r"..."`, `r#"..."#`, `br#"..."#`) opening at `start`, if one does.
fn raw_string_end(chars: &[char], start: usize) -> Option<usize> {
    let mut at = start;
    if chars.get(at) == Some(&'b') {
        at += 1;
    }
    if chars.get(at) != Some(&'r') {
        return None;
    }
    at += 1;
    let hashes = chars[at..].iter().take_while(|&&c| c == '#').count();
    at += hashes;
    if chars.get(at) != Some(&'"') {
        return None;
    }
    at += 1;
    while at < chars.len() {
        if chars[at] == '"' && chars[at + 1..].iter().take(hashes).filter(|&&c| c == '#').count() == hashes {
            return Some(at + 1 + hashes);
        }
        at += 1;
    }
    Some(chars.len())
}

/// The index just past a quoted literal opening at `start` with `quote`, honouring backslash escapes.
fn quoted_end(chars: &[char], start: usize, quote: char) -> usize {
    let mut at = start + 1;
    while at < chars.len() {
        match chars[at] {
            '\\' => at += 2,
            c if c == quote => return at + 1,
            _ => at += 1,
        }
    }
    chars.len()
}

/// Whether the `'` at `start` opens a character literal (`'x'`, `'\n'`) rather than a lifetime (`'a`).
fn char_literal(chars: &[char], start: usize) -> bool {
    match chars.get(start + 1) {
        Some('\\') => true,
        Some(_) => chars.get(start + 2) == Some(&'\''),
        None => false,
    }
}
