//! The map's rule on unit-test files (docs/contributing.md, "Tests and golden files"): a test-only file under a
//! crate's `src/` is named `<name>_tests.rs`, after the file it tests (`mod_tests.rs` for a folder's `mod.rs`,
//! `lib_tests.rs` for a crate's `lib.rs`) or a theme of that module's tests, lies beside it, and is declared
//! under `#[cfg(test)]`, so that one glance at a folder tells the code from its tests.

use std::path::{Path, PathBuf};

use super::{code_only, rust_files, shown, source_roots};

/// The ending of every test-only file's name.
const SUFFIX: &str = "_tests.rs";

/// A file-module declaration (`mod name;`) with the attributes written above it.
struct Declaration {
    /// The declaring file.
    file: PathBuf,
    /// Its 1-based line.
    line: usize,
    /// The name of the file it loads (from `#[path = ".."]`, else `name.rs`).
    loads: String,
    /// Whether `#[cfg(test)]` is among its attributes.
    test_only: bool,
}

#[test]
fn unit_test_files_are_named_after_what_they_test() {
    let mut offenders = Vec::new();
    for src in source_roots() {
        let files = rust_files(&src);
        let declarations: Vec<Declaration> = files.iter().flat_map(|f| declarations(f)).collect();
        for path in &files {
            let name = file_name(path);
            let stem = name.trim_end_matches(".rs");
            let says_test = stem.split('_').any(|word| matches!(word, "test" | "tests" | "testing"));
            if says_test && !name.ends_with(SUFFIX) {
                offenders.push(format!("{}: a test file's name ends in `{SUFFIX}`", shown(path)));
            }
            if path.parent().is_some_and(|d| d.file_name().is_some_and(|n| n == "tests")) {
                offenders
                    .push(format!("{}: no `tests/` folder under src/ (a sibling `*{SUFFIX}` instead)", shown(path)));
            }
            if name.ends_with(SUFFIX) {
                let declared = declarations.iter().any(|d| {
                    d.loads == name
                        && d.file.parent() == path.parent()
                        && (d.test_only || file_name(&d.file).ends_with(SUFFIX))
                });
                if !declared {
                    offenders.push(format!(
                        "{}: declared by no file beside it under `#[cfg(test)]` (at the end of the file it tests: \
                         `#[cfg(test)] #[path = \"{name}\"] mod tests;`)",
                        shown(path)
                    ));
                }
            }
        }
        for d in declarations.iter().filter(|d| d.test_only && !d.loads.ends_with(SUFFIX)) {
            offenders.push(format!(
                "{}:{}: a `#[cfg(test)]` module's file `{}` is not named `*{SUFFIX}`",
                shown(&d.file),
                d.line,
                d.loads
            ));
        }
    }
    assert!(
        offenders.is_empty(),
        "unit-test files off the convention (docs/contributing.md, \"Tests and golden files\"):\n  {}",
        offenders.join("\n  ")
    );
}

/// The file name of `path`, as text.
fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Every `mod name;` of `file` (not inline modules), with the attributes on the lines above it.
fn declarations(file: &Path) -> Vec<Declaration> {
    let source = std::fs::read_to_string(file).unwrap_or_default();
    let code = code_only(&source);
    let mut out = Vec::new();
    let mut attributes: Vec<&str> = Vec::new();
    for (index, (raw, code)) in source.lines().zip(code.lines()).enumerate() {
        let code = code.trim();
        if code.is_empty() {
            continue;
        }
        if code.starts_with("#[") {
            attributes.push(raw.trim());
            continue;
        }
        let name = code
            .strip_suffix(';')
            .and_then(|c| c.split_whitespace().collect::<Vec<_>>().split_last().map(|(n, h)| (*n, h.to_vec())))
            .filter(|(_, head)| head.last() == Some(&"mod"))
            .map(|(name, _)| name.to_string());
        if let Some(name) = name {
            let path_attribute = attributes.iter().find_map(|a| {
                let value = a.strip_prefix("#[path")?.trim_start().strip_prefix('=')?.trim();
                value.strip_suffix("]")?.trim().trim_matches('"').rsplit('/').next().map(str::to_string)
            });
            out.push(Declaration {
                file: file.to_path_buf(),
                line: index + 1,
                loads: path_attribute.unwrap_or_else(|| format!("{name}.rs")),
                test_only: attributes.iter().any(|a| a.replace(' ', "") == "#[cfg(test)]"),
            });
        }
        attributes.clear();
    }
    out
}
