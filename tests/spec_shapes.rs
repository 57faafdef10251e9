//! Every spec under `specs/` runs at smoke scale on the mock backend (collectors off, so nothing depends on
//! timing) and the *shape* of each result is snapshotted in `golden/shapes-specs/`: which metrics exist, units,
//! series lengths, memory categories, environment fields, outcome; measured values are redacted to type tags,
//! while deterministic ones (plan, analysis, memory estimate) and the spec hash are exact.
//!
//! This file holds one `glob!` test only (insta collects glob failures process-wide).

#![allow(clippy::unwrap_used)]

#[path = "it/common/mod.rs"]
mod common;

use assert_cmd::Command;
use common::spec_run::shape_entry;
use trainbench::result::load;

/// Smoke scale: few iterations, one repeat; the sweep (batch sizes, precisions, topologies) is kept.
const SMOKE: [&str; 6] = ["--set", "run.iterations=5", "--set", "run.warmup=1", "--set", "run.repeats=1"];

#[test]
fn every_spec_has_a_stable_result_shape() {
    let mut settings = common::golden_settings("shapes-specs");
    settings.set_omit_expression(true);
    settings.bind(|| {
        insta::glob!("../specs", "**/*.toml", |path| {
            let tmp = tempfile::tempdir().unwrap();
            let out = Command::cargo_bin("trainbench")
                .unwrap()
                .arg("run")
                .arg(path)
                .args(["--backend", "mock", "--no-collectors", "-q", "--out"])
                .arg(tmp.path())
                .args(SMOKE)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
            let results = load::load_all(&[tmp.path()]).unwrap();
            let mut snapshot = serde_json::Map::new();
            for l in &results {
                let (run_id, entry) = shape_entry(&l.result, &[]);
                snapshot.insert(run_id, entry);
            }
            insta::assert_json_snapshot!(serde_json::Value::Object(snapshot));
        });
    });
}
