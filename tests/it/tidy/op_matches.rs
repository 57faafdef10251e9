//! Tidy rule: every `match` on the graph's `Op` enum is exhaustive, with no `_ =>` or binding catch-all arm,
//! so a new op does not compile until analysis, parameters, initialisation, pricing and each lowering handle
//! it (`docs/contributing.md`, "How to add a model", step 5). Scans every `.rs` under `src/` and
//! `crates/*/src/`, comments and strings left out.

use std::fs;
use std::path::PathBuf;

use super::{code_chars, is_ident};

/// One `match` that names `Op::` patterns and also has a catch-all arm.
#[derive(Debug, PartialEq, Eq)]
struct Offender {
    /// 1-based line of the catch-all arm.
    line: usize,
    /// The catch-all pattern as written (`_`, `other`, ...).
    pattern: String,
}

/// Whether the word `word` stands at `at` on identifier boundaries.
fn word_at(code: &[char], at: usize, word: &str) -> bool {
    let word: Vec<char> = word.chars().collect();
    code.len() >= at + word.len()
        && code[at..at + word.len()] == word[..]
        && (at == 0 || !is_ident(code[at - 1]))
        && code.get(at + word.len()).is_none_or(|&c| !is_ident(c))
}

/// The first non-whitespace character at or after `at`, with its index.
fn next_code(code: &[char], at: usize) -> Option<(usize, char)> {
    (at..code.len()).find(|&i| !code[i].is_whitespace()).map(|i| (i, code[i]))
}

/// Whether a pattern names the graph's `Op` (`Op::Conv`, `graph::Op::Add`), not another `..Op::` enum.
fn names_op(pattern: &[char]) -> bool {
    (0..pattern.len()).any(|i| word_at(pattern, i, "Op") && pattern[i + 2..].starts_with(&[':', ':']))
}

/// Whether a pattern matches anything: `_`, or a lone binding (`other`, `ref x`, `mut x`).
fn catch_all(pattern: &str) -> bool {
    let words: Vec<&str> = pattern.split_whitespace().collect();
    let binding = match words.as_slice() {
        [one] => *one,
        ["ref" | "mut", one] | ["ref", "mut", one] => *one,
        _ => return false,
    };
    binding == "_"
        || (binding.chars().next().is_some_and(|c| c.is_lowercase() || c == '_') && binding.chars().all(is_ident))
}

/// An arm's pattern without the attributes before it (`#[allow(unreachable_patterns)] _`).
fn without_attributes(mut text: &str) -> &str {
    while let Some(rest) = text.strip_prefix("#[") {
        let mut depth = 1usize;
        let end = rest.char_indices().find_map(|(i, c)| {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(i + 1)
        });
        text = rest[end.unwrap_or(rest.len())..].trim_start();
    }
    text
}

/// The arm patterns of the `match` whose body opens at `open` (a `{`), each with the index where it starts
/// (after its attributes).
fn arm_patterns(code: &[char], open: usize) -> Vec<(usize, String)> {
    let mut patterns = Vec::new();
    let mut depth = 0usize;
    let mut in_pattern = true;
    let mut start = open + 1;
    let mut at = open;
    while at < code.len() {
        match code[at] {
            '{' | '(' | '[' => depth += 1,
            '}' | ')' | ']' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
                // A block body closing back at arm level ends the arm unless the expression goes on
                // (`} else {`, `}.method()`, `}?`).
                if depth == 1 && !in_pattern && code[at] == '}' {
                    let goes_on = match next_code(code, at + 1) {
                        Some((i, _)) if word_at(code, i, "else") || word_at(code, i, "as") => true,
                        Some((_, c)) => ".?+*/%^=".contains(c),
                        None => false,
                    };
                    if !goes_on {
                        in_pattern = true;
                        start = at + 1;
                    }
                }
            }
            ',' if depth == 1 && !in_pattern => {
                in_pattern = true;
                start = at + 1;
            }
            '=' if depth == 1 && in_pattern && code.get(at + 1) == Some(&'>') => {
                let raw: String = code[start..at].iter().collect();
                let text = raw.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
                let text = without_attributes(text).trim_start_matches(|c: char| c.is_whitespace() || c == '|');
                let skipped = raw[..raw.len() - text.len()].chars().count();
                patterns.push((start + skipped, text.trim().to_string()));
                in_pattern = false;
                at += 1;
            }
            _ => {}
        }
        at += 1;
    }
    patterns
}

/// The catch-all arms of every `match` in `source` that also names `Op::` in an arm pattern.
fn offenders(source: &str) -> Vec<Offender> {
    let code = code_chars(source);
    let mut found = Vec::new();
    for at in 0..code.len() {
        if !word_at(&code, at, "match") {
            continue;
        }
        let mut nesting = 0usize;
        let open = (at + 5..code.len()).find(|&i| match code[i] {
            '(' | '[' => {
                nesting += 1;
                false
            }
            ')' | ']' => {
                nesting = nesting.saturating_sub(1);
                false
            }
            '{' => nesting == 0,
            _ => false,
        });
        let Some(open) = open else { continue };
        let patterns = arm_patterns(&code, open);
        if !patterns.iter().any(|(_, p)| names_op(&p.chars().collect::<Vec<_>>())) {
            continue;
        }
        for (start, pattern) in patterns.iter().filter(|(_, p)| catch_all(p)) {
            let line = 1 + code[..*start].iter().filter(|&&c| c == '\n').count();
            found.push(Offender { line, pattern: pattern.clone() });
        }
    }
    found
}

#[test]
fn no_catch_all_arm_in_a_match_on_op() {
    let root = super::root();
    let files: Vec<PathBuf> = super::source_roots().iter().flat_map(|src| super::rust_files(src)).collect();
    assert!(files.len() > 100, "the scan found only {} files under src/ and crates/*/src/", files.len());
    let mut report = Vec::new();
    for file in &files {
        let source = fs::read_to_string(file).expect("source file is UTF-8");
        for offender in offenders(&source) {
            let shown = file.strip_prefix(root).unwrap_or(file).display();
            report.push(format!("{shown}:{}: `{} =>`", offender.line, offender.pattern));
        }
    }
    assert!(
        report.is_empty(),
        "a `match` on `Op` has a catch-all arm; list every variant instead so that a new op does not compile \
         until this place handles it (docs/contributing.md, \"How to add a model\", step 5):\n{}",
        report.join("\n")
    );
}

#[test]
fn the_rule_sees_catch_alls_and_only_them() {
    let source = r#"
fn price(op: &Op) -> u32 {
    match op {
        // _ => in a comment is not an arm
        Op::Conv { .. } => { let s = "_ => {"; 1 }
        Op::Add | Op::Mul => if true { 2 } else { 3 },
        _ => 0,
    }
}
fn name(op: &Op) -> &str {
    match op {
        Op::Softmax => "softmax",
        #[allow(unreachable_patterns)]
        other => other.kind_name(),
    }
}
fn fine(op: &Op, kind: Kind) -> u32 {
    let a = match op { Op::Add => 1, Op::Mul { .. } => 2 };
    let b = match kind { Kind::A => 1, _ => 0 };
    let c = match op { Op::Add if a > 1 => 1, _x if b > 1 => 2, Op::Mul => 3 };
    let d = match reduce { ReduceOp::Sum => 1, _ => 2 };
    a + b + c + d + match (op, 'x') { (Op::Add, '{') => 1, (Op::Mul, _) => 2, (_, None) => 3 }
}
"#;
    let found = offenders(source);
    assert_eq!(found, vec![Offender { line: 7, pattern: "_".into() }, Offender { line: 14, pattern: "other".into() }]);
}
