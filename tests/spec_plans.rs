//! Every spec under `specs/` validates, points editors at the schema with a correct relative `#:schema` line,
//! and expands to the plan snapshotted in `golden/plans/`.
//!
//! This file holds one `glob!` test only (insta collects glob failures process-wide).

#![allow(clippy::unwrap_used)]

#[path = "it/common/mod.rs"]
mod common;

use std::collections::HashSet;
use std::path::Path;

use trainbench::plan::plan;
use trainbench::spec::{Overrides, SpecValidator};

#[test]
fn every_spec_validates_and_its_plan_is_stable() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let validator = SpecValidator::new().unwrap();
    let mut settings = common::golden_settings("plans");
    settings.set_omit_expression(true);
    settings.bind(|| {
        insta::glob!("../specs", "**/*.toml", |path| {
            let relative = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(path).unwrap();
            check_schema_line(path, &text, root);
            let checked = validator.check_file(path, &relative, &Overrides::none());
            let rendered = trainbench::spec::diagnostics::render_text(&checked.diagnostics);
            assert!(checked.diagnostics.is_empty(), "{relative} has diagnostics:\n{rendered}");
            let spec = checked.spec.unwrap();
            let runs = plan(&spec);
            let ids: HashSet<&str> = runs.iter().map(|r| r.id.as_str()).collect();
            assert_eq!(ids.len(), runs.len(), "{relative}: run ids are not unique");
            assert!(runs.iter().all(|r| r.id.starts_with(spec.name())), "{relative}: ids must start with the name");
            let table = trainbench::commands::plan::plan_table(&runs);
            let snapshot = format!("spec: {relative}\nname: {}\nruns: {}\n\n{table}\n", spec.name(), runs.len());
            insta::assert_snapshot!("plan", snapshot);
        });
    });
}

/// The first line must be `#:schema <relative path to schema/spec.schema.json>` and that path must exist.
fn check_schema_line(path: &Path, text: &str, root: &Path) {
    let first = text.lines().next().unwrap_or_default();
    let target = first
        .strip_prefix("#:schema ")
        .unwrap_or_else(|| panic!("{}: first line must be `#:schema ...`", path.display()));
    let resolved = path.parent().unwrap().join(target);
    assert!(resolved.exists(), "{}: `#:schema {target}` does not exist", path.display());
    assert_eq!(
        resolved.canonicalize().unwrap(),
        root.join("schema/spec.schema.json").canonicalize().unwrap(),
        "{}: `#:schema` must point at schema/spec.schema.json",
        path.display()
    );
}
