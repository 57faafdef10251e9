//! The committed `schema/spec.schema.json` must equal what the wire types generate today.

#![allow(clippy::unwrap_used)]

use std::path::Path;

#[test]
fn committed_spec_schema_is_up_to_date() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/spec.schema.json");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = trainbench::spec::schema::spec_schema_text();
    assert!(
        committed == generated,
        "schema/spec.schema.json is stale (the spec types changed).\n\
         Refresh it with:\n\n    cargo run -- schema > schema/spec.schema.json\n"
    );
}

#[test]
fn schema_command_prints_the_committed_schema() {
    let output = assert_cmd::Command::new(env!("CARGO_BIN_EXE_trainbench")).arg("schema").output().unwrap();
    assert!(output.status.success());
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(printed, trainbench::spec::schema::spec_schema());
    assert_eq!(printed["title"], "trainbench spec v1");
    assert!(printed["$defs"]["ModelSpec"]["allOf"].as_array().unwrap().len() >= 12);
}

#[test]
fn schema_carries_doc_comments_as_descriptions() {
    let schema = trainbench::spec::schema::spec_schema();
    let warmup = &schema["$defs"]["RunSpec"]["properties"]["warmup"]["description"];
    assert!(warmup.as_str().unwrap().contains("warm-up") || warmup.as_str().unwrap().contains("discarded"), "{warmup}");
    assert_eq!(schema["$defs"]["SweepSpec"]["properties"]["batch_sizes"]["minItems"], 1);
}

#[test]
fn committed_hardware_schema_is_up_to_date() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/hardware.schema.json");
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = trainbench::hardware::hardware_schema_text();
    assert!(
        committed == generated,
        "schema/hardware.schema.json is stale (the hardware profile types changed).\n\
         Refresh it with:\n\n    cargo run -- schema --hardware > schema/hardware.schema.json\n"
    );
}
