//! The invalid-spec corpus: every file under `tests/invalid/` is a different mistake; `trainbench validate`
//! must exit with code 2 and print the diagnostics snapshotted in `golden/invalid/`.
//!
//! This file holds one `glob!` test only (insta collects glob failures process-wide).

#![allow(clippy::unwrap_used)]

#[path = "it/common/mod.rs"]
mod common;

use std::path::Path;

/// Corpus files whose diagnostics come from the model zoo rather than the spec validator: their snapshots
/// follow the zoo's wording and are expected to change with it.
const ZOO_DEPENDENT: &[&str] = &["linear-in-features-mismatch.toml"];

#[test]
fn every_invalid_spec_is_reported_with_exit_code_2() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut settings = common::golden_settings("invalid");
    settings.set_omit_expression(true);
    settings.bind(|| {
        insta::glob!("invalid/*.toml", |path| {
            let relative = path.strip_prefix(root).unwrap();
            let output = assert_cmd::Command::new(env!("CARGO_BIN_EXE_trainbench"))
                .current_dir(root)
                .arg("validate")
                .arg(relative)
                .output()
                .unwrap();
            assert_eq!(output.status.code(), Some(2), "{}: {output:?}", relative.display());
            assert!(output.stderr.is_empty(), "{}: {}", relative.display(), String::from_utf8_lossy(&output.stderr));
            let text = String::from_utf8(output.stdout).unwrap();
            let file = path.file_name().unwrap().to_string_lossy().to_string();
            let mut local = insta::Settings::clone_current();
            if ZOO_DEPENDENT.contains(&file.as_str()) {
                local.set_description("from the model zoo: expected to change when the zoo's message changes");
            } else {
                local.set_description(first_line_comment(path));
            }
            local.bind(|| insta::assert_snapshot!("diagnostics", text));
        });
    });
}

/// The `# invalid: ...` line that says what each corpus file gets wrong.
fn first_line_comment(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    text.lines().next().and_then(|l| l.strip_prefix("# invalid: ")).unwrap_or("binary or empty input").to_string()
}
