//! Rules of the map's opening ("How the code reads"): every Rust file is under 600 lines and opens with a `//!`
//! line saying what it owns.

use super::{governed_files, shown};

/// The longest a Rust file may be, in lines.
const MAX_LINES: usize = 600;

#[test]
fn every_rust_file_is_under_600_lines() {
    let long: Vec<String> = governed_files()
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path).ok()?.lines().count();
            (lines >= MAX_LINES).then(|| format!("{} ({lines} lines)", shown(path)))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files of {MAX_LINES} lines or more (split them by what they own):\n  {}",
        long.join("\n  ")
    );
}

#[test]
fn every_rust_file_opens_with_a_module_doc_line() {
    let undocumented: Vec<String> = governed_files()
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            !text.lines().next().is_some_and(|first| first.starts_with("//!"))
        })
        .map(|path| shown(path))
        .collect();
    assert!(
        undocumented.is_empty(),
        "files whose first line is not a `//!` line saying what the file owns:\n  {}",
        undocumented.join("\n  ")
    );
}
