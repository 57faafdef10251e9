//! The map's rules on errors: no public function returns `Result<_, String>` (the kind of a failure is lost before
//! a caller can branch on it; a `thiserror` enum per stage keeps it), and `CommandError` has no catch-all
//! variant holding only a message besides the user's input and a broken invariant.

use super::{code_only, rust_files, shown, source_roots};

#[test]
fn no_public_function_returns_a_string_error() {
    let mut offenders = Vec::new();
    for src in source_roots() {
        for path in rust_files(&src) {
            let code = code_only(&std::fs::read_to_string(&path).unwrap_or_default());
            for (line, signature) in public_signatures(&code) {
                if returns_string_error(&signature) {
                    offenders.push(format!(
                        "{}:{line}: {}",
                        shown(&path),
                        signature.split_whitespace().collect::<Vec<_>>().join(" ")
                    ));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "{} public functions return `Result<_, String>` (give the failure a typed error):\n  {}",
        offenders.len(),
        offenders.join("\n  ")
    );
}

/// Each `pub fn` signature of `code` (from `pub` to the body's `{` or the `;`), with its 1-based line.
/// `pub(crate)` and narrower are not public.
fn public_signatures(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("pub ") {
        let start = from + at;
        from = start + 4;
        let preceded_by_ident = code[..start].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_');
        if preceded_by_ident {
            continue;
        }
        let head = code[from..].trim_start();
        let head = ["const ", "async ", "unsafe ", "extern "]
            .iter()
            .fold(head, |h, q| h.strip_prefix(q).unwrap_or(h).trim_start());
        if !head.starts_with("fn ") {
            continue;
        }
        let mut depth = 0i32;
        let mut end = code.len();
        for (i, c) in code[from..].char_indices() {
            match c {
                '(' | '[' | '<' => depth += 1,
                ')' | ']' => depth -= 1,
                '>' if !code[from..from + i].ends_with('-') => depth -= 1,
                '{' | ';' if depth <= 0 => {
                    end = from + i;
                    break;
                }
                _ => {}
            }
        }
        let line = code[..start].matches('\n').count() + 1;
        out.push((line, code[start..end].to_string()));
        from = end.max(from);
    }
    out
}

/// Whether a signature's return type is a `Result` whose error is `String`.
fn returns_string_error(signature: &str) -> bool {
    let Some(arrow) = signature.find("->") else { return false };
    let returned = signature[arrow + 2..].split(" where").next().unwrap_or_default();
    let returned = returned.split("\nwhere").next().unwrap_or_default();
    let ret: String = returned.chars().filter(|c| !c.is_whitespace()).collect();
    ret.contains("Result<") && ret.ends_with(",String>") || ret.contains(",String>>")
}

#[test]
fn the_signature_reader_sees_what_it_should() {
    let code = "pub fn a(x: Vec<u8>) -> Result<(), String> {}\npub(crate) fn b() -> Result<u8, String>;\n\
                pub fn c() -> Result<Vec<u8>, String>\nwhere T: Clone {}\npub fn d() -> Result<String, E> {}\n\
                pub fn e() -> Option<Result<u8, String>> {}\n";
    let hits: Vec<usize> =
        public_signatures(code).into_iter().filter(|(_, s)| returns_string_error(s)).map(|(l, _)| l).collect();
    assert_eq!(hits, vec![1, 3, 6]);
}

/// The variants of `CommandError` that may carry a bare message: the user's input, and a broken invariant of the
/// program itself. Every other failure keeps its kind (its typed source error) so that the exit code and a caller
/// can branch on it; a catch-all `Other(String)` would lose it.
const MESSAGE_ONLY_VARIANTS: [&str; 2] = ["Input", "Internal"];

#[test]
fn command_errors_keep_their_kind() {
    let path = super::root().join("src/commands/mod.rs");
    let code = code_only(&std::fs::read_to_string(&path).unwrap_or_default());
    let Some(start) = code.find("pub enum CommandError {") else {
        panic!("{}: no `pub enum CommandError`", shown(&path));
    };
    let body = &code[start..];
    let body = &body[..body.find("\n}").unwrap_or(body.len())];
    let stringly: Vec<&str> = body
        .lines()
        .map(str::trim)
        .filter_map(|line| line.strip_suffix("(String),"))
        .filter(|variant| !MESSAGE_ONLY_VARIANTS.contains(variant))
        .collect();
    assert!(
        stringly.is_empty(),
        "{}: `CommandError` variants holding only a message: {} (keep the typed source error as the variant's \
         field; only {:?} carry a bare message)",
        shown(&path),
        stringly.join(", "),
        MESSAGE_ONLY_VARIANTS
    );
}
