//! Local datasets through the CLI: `validate` refuses what a run could not read (exit 2, the file and both
//! shapes named), and `run` reads the files, recording the dataset and the loader's own throughput in the
//! result's `data` section.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

use crate::common::datasets::{self, mlp_spec};

fn validate(dir: &Path, spec: &str) -> (i32, String) {
    let path = dir.join("spec.toml");
    std::fs::write(&path, spec).unwrap();
    let out = Command::cargo_bin("trainbench").unwrap().arg("validate").arg(&path).output().unwrap();
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stdout).to_string())
}

#[test]
fn a_valid_npy_dataset_passes_validation() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 40, 64, 10);
    datasets::npy_u8(&dir.path().join("u"), 40, 64, 10);
    assert_eq!(validate(dir.path(), &mlp_spec(64, 10, "d", "npy", "")).0, 0);
    assert_eq!(validate(dir.path(), &mlp_spec(64, 10, "u", "npy", "workers = 2")).0, 0);
}

#[test]
fn a_mismatched_width_is_refused_naming_the_file_and_both_shapes() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 40, 63, 10);
    let (code, text) = validate(dir.path(), &mlp_spec(64, 10, "d", "npy", ""));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("inputs.npy") && text.contains("[40, 63]") && text.contains("[40, 64]"), "{text}");
    assert!(text.contains("field: dataset.path"), "{text}");
}

#[test]
fn a_truncated_file_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = datasets::npy_f32(&dir.path().join("d"), 40, 64, 10);
    let bytes = std::fs::read(d.join("inputs.npy")).unwrap();
    std::fs::write(d.join("inputs.npy"), &bytes[..bytes.len() - 100]).unwrap();
    let (code, text) = validate(dir.path(), &mlp_spec(64, 10, "d", "npy", ""));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("inputs.npy") && text.contains("truncated"), "{text}");
}

#[test]
fn labels_outside_the_classes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 40, 64, 12);
    let (code, text) = validate(dir.path(), &mlp_spec(64, 10, "d", "npy", ""));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("labels.npy") && text.contains("label 10") && text.contains("10 classes"), "{text}");
}

#[test]
fn a_dataset_smaller_than_one_batch_and_pipeline_keys_without_threads_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 5, 64, 10);
    let (code, text) = validate(dir.path(), &mlp_spec(64, 10, "d", "npy", ""));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("5 samples") && text.contains("batch of 8"), "{text}");
    datasets::npy_f32(&dir.path().join("d"), 40, 64, 10);
    let (code, text) = validate(dir.path(), &mlp_spec(64, 10, "d", "npy", "prefetch = 4"));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("`dataset.prefetch` needs reading threads"), "{text}");
}

#[test]
fn a_model_without_class_labels_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 40, 64, 10);
    let spec = "version = 1\nname = \"gan\"\n[model]\nfamily = \"wgan-gp\"\n[dataset]\nsource = \"local\"\npath = \"d\"\nformat = \"npy\"\n";
    let (code, text) = validate(dir.path(), spec);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("has no class-label input"), "{text}");
    assert!(text.contains("field: dataset.source"), "{text}");
}

#[test]
fn a_run_reads_the_dataset_and_records_it() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 43, 64, 10);
    let spec = dir.path().join("spec.toml");
    std::fs::write(&spec, mlp_spec(64, 10, "d", "npy", "workers = 2\non_error = \"skip\"")).unwrap();
    let out = dir.path().join("out");
    Command::cargo_bin("trainbench").unwrap().args(["run", "--quiet", "--out"]).arg(&out).arg(&spec).assert().success();
    let file = out.join("local-data").join("local-data.b8.fp32.1x1.r0.json");
    let result: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(result["outcome"]["status"], "completed");
    let data = &result["data"];
    assert_eq!(data["format"], "npy");
    assert_eq!(data["path"], dir.path().join("d").display().to_string());
    assert_eq!(data["description"], "inputs.npy float32 [43, 64], labels.npy int64 [43]");
    assert_eq!((data["samples"].as_u64(), data["samples_per_epoch"].as_u64()), (Some(43), Some(40)));
    assert_eq!((data["batches_per_epoch"].as_u64(), data["dropped_per_epoch"].as_u64()), (Some(5), Some(3)));
    assert_eq!((data["workers"].as_u64(), data["prefetch"].as_u64()), (Some(2), Some(4)));
    assert_eq!((data["on_error"].as_str(), data["skipped"].as_u64()), (Some("skip"), Some(0)));
    let loader = &data["loader"];
    assert!(loader["batches"].as_u64().unwrap() >= 3);
    assert_eq!(loader["samples"].as_u64().unwrap(), 8 * loader["batches"].as_u64().unwrap());
    assert!(loader["samples_per_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_dataset_broken_after_validation_fails_the_run_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = datasets::npy_f32(&dir.path().join("d"), 40, 64, 10);
    let spec = dir.path().join("spec.toml");
    std::fs::write(&spec, mlp_spec(64, 10, "d", "npy", "")).unwrap();
    let suite = trainbench::runner::Suite::from_validated(
        &trainbench::spec::load_spec(&spec, &trainbench::spec::Overrides::none()).unwrap(),
    );
    std::fs::write(d.join("labels.npy"), b"garbage").unwrap();
    let opts = trainbench::runner::RunnerOptions { out_dir: dir.path().join("out"), ..Default::default() };
    let report = trainbench::runner::run_suite(&suite, &opts, &mut |_, _| {}).unwrap();
    let outcome = serde_json::to_value(&report.results[0].outcome).unwrap();
    assert_eq!(outcome["status"], "failed");
    let message = outcome["message"].as_str().unwrap();
    assert!(message.contains("labels.npy") && message.contains("not a .npy file"), "{message}");
    assert!(report.results[0].data.is_none());
}
