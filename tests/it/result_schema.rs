//! Keeps `schema/result.schema.json` in sync with the result types: fails when the committed file is stale.
//! Regenerate with `TRAINBENCH_UPDATE_SCHEMA=1 cargo test --test it result_schema::`.
#![allow(clippy::unwrap_used)]

use std::path::Path;

#[test]
fn committed_result_schema_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/result.schema.json");
    let generated = trainbench::result::result_schema_text();
    if std::env::var_os("TRAINBENCH_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "schema/result.schema.json is stale; regenerate with `TRAINBENCH_UPDATE_SCHEMA=1 cargo test --test it result_schema::`"
    );
}

#[test]
fn result_schema_is_a_valid_json_schema() {
    let schema = trainbench::result::result_schema();
    jsonschema::draft202012::meta::validate(&schema).unwrap();
    assert_eq!(schema["title"], "trainbench run result");
    assert!(schema["properties"]["format_version"].is_object());
}

#[test]
fn schema_command_prints_the_result_schema() {
    let out = assert_cmd::Command::cargo_bin("trainbench").unwrap().args(["schema", "--result"]).assert().success();
    let printed = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert_eq!(printed, trainbench::result::result_schema_text());
}
