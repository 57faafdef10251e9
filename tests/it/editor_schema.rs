//! The spec schema as an editor sees it, through taplo (the engine of Even Better TOML): every shipped spec
//! passes through its `#:schema` line, and a typo'd key of a tagged table (`[model]`, a custom layer, the
//! optimizer) is reported by name with the keys allowed there, not as a wall of `oneOf` failures.
//!
//! taplo comes from npm (`bash scripts/editor-deps.sh`, which `scripts/test.sh` runs); `TRAINBENCH_TAPLO` names
//! another taplo binary. Without one the tests skip with a notice, and fail under `CI=true`.
#![allow(clippy::unwrap_used)] // test helpers outside test functions

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The taplo to run, or `None` (after a notice; a failure under `CI=true`) when there is none.
fn taplo() -> Option<PathBuf> {
    let found = match std::env::var_os("TRAINBENCH_TAPLO") {
        Some(path) => Some(PathBuf::from(path)),
        None => Some(Path::new(ROOT).join(".tools/taplo/node_modules/.bin/taplo")).filter(|p| p.exists()),
    };
    if found.is_none() {
        trainbench_contract::conformance::prerequisite_missing(
            "taplo is missing: run `bash scripts/editor-deps.sh` (needs Node.js and npm)",
        );
    }
    found
}

/// `taplo check` over `files` (schemas come from their `#:schema` lines): success and the output.
fn check(taplo: &Path, files: &[PathBuf]) -> (bool, String) {
    let output = Command::new(taplo)
        .args(["check", "--no-auto-config", "--colors", "never"])
        .args(files)
        .current_dir(ROOT)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

/// Every `.toml` under `dir`, sorted.
fn toml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(toml_files(&path));
        } else if path.extension().is_some_and(|e| e == "toml") {
            files.push(path);
        }
    }
    files.sort();
    files
}

#[test]
fn every_shipped_spec_passes_taplo_through_its_schema_line() {
    let Some(taplo) = taplo() else { return };
    let schema = Path::new(ROOT).join("schema/spec.schema.json").canonicalize().unwrap();
    let specs = toml_files(&Path::new(ROOT).join("specs"));
    assert!(specs.len() >= 20, "found only {} specs", specs.len());
    // A spec without the line would pass unchecked.
    for spec in &specs {
        let text = std::fs::read_to_string(spec).unwrap();
        let line = text.lines().next().and_then(|l| l.strip_prefix("#:schema ")).unwrap_or_default();
        let target = spec.parent().unwrap().join(line.trim()).canonicalize().ok();
        assert_eq!(
            target.as_ref(),
            Some(&schema),
            "{}: the first line must be `#:schema` to the schema",
            spec.display()
        );
    }
    let (ok, output) = check(&taplo, &specs);
    assert!(ok, "taplo rejected shipped specs:\n{output}");
}

/// `dir/name`: a copy of the spec `from` (relative to `specs/`), edited by `edit`, whose `#:schema` line points
/// to the schema by absolute path.
fn typo_copy(dir: &Path, name: &str, from: &str, edit: impl Fn(&str) -> String) -> PathBuf {
    let text = std::fs::read_to_string(Path::new(ROOT).join("specs").join(from)).unwrap();
    let schema = Path::new(ROOT).join("schema/spec.schema.json");
    let body: Vec<&str> = text.lines().skip_while(|l| l.starts_with("#:schema")).collect();
    let edited = edit(&body.join("\n"));
    assert_ne!(edited, body.join("\n"), "the edit of {from} changed nothing");
    let path = dir.join(name);
    std::fs::write(&path, format!("#:schema {}\n{edited}\n", schema.display())).unwrap();
    path
}

/// The distinct `error:` messages of taplo's output.
fn messages(output: &str) -> BTreeSet<String> {
    output.lines().filter_map(|l| l.strip_prefix("error: ")).map(str::to_string).collect()
}

#[test]
fn a_typo_in_a_tagged_table_names_the_key_and_the_keys_allowed() {
    let Some(taplo) = taplo() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // (the typo'd copy, the unknown key, the keys its variant allows)
    let cases = [
        (
            typo_copy(tmp.path(), "model-key.toml", "smoke/mlp.toml", |t| {
                t.replace("\ninputs = 64\n", "\ninputz = 64\n")
            }),
            "inputz",
            r#"["classes","family","hidden","inputs"]"#,
        ),
        (
            typo_copy(tmp.path(), "layer-key.toml", "smoke/custom.toml", |t| {
                t.replace("name = \"fc\"", "nmae = \"fc\"")
            }),
            "nmae",
            r#"["bias","in_features","name","out_features","type"]"#,
        ),
        (
            typo_copy(tmp.path(), "optimizer-key.toml", "smoke/mlp.toml", |t| {
                format!("{t}\n\n[training.optimizer]\nkind = \"adam\"\nlrr = 0.01")
            }),
            "lrr",
            r#"["beta1","beta2","eps","kind","lr","weight_decay"]"#,
        ),
    ];
    for (file, key, allowed) in &cases {
        let (ok, output) = check(&taplo, std::slice::from_ref(file));
        assert!(!ok, "taplo accepted {}:\n{output}", file.display());
        let expected: BTreeSet<String> = [
            format!("Additional properties are not allowed ('{key}' was unexpected)"),
            format!("\"{key}\" is not one of {allowed}"),
        ]
        .into();
        // Only the variant the tag names speaks.
        assert_eq!(messages(&output), expected, "{}:\n{output}", file.display());
        assert!(!output.contains("oneOf") && !output.contains("anyOf"), "{output}");
    }
}

#[test]
fn every_shipped_hardware_profile_passes_taplo_through_its_schema_line() {
    let Some(taplo) = taplo() else { return };
    let schema = Path::new(ROOT).join("schema/hardware.schema.json").canonicalize().unwrap();
    let profiles = toml_files(&Path::new(ROOT).join("hardware"));
    assert!(profiles.len() >= 6, "found only {} profiles", profiles.len());
    for p in &profiles {
        let text = std::fs::read_to_string(p).unwrap();
        let line = text.lines().next().and_then(|l| l.strip_prefix("#:schema ")).unwrap_or_default();
        let target = p.parent().unwrap().join(line.trim()).canonicalize().ok();
        assert_eq!(target.as_ref(), Some(&schema), "{}: the first line must be `#:schema` to the schema", p.display());
    }
    let (ok, output) = check(&taplo, &profiles);
    assert!(ok, "taplo rejected shipped hardware profiles:\n{output}");
}
