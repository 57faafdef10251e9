//! The prediction gate: `trainbench predict --format json` for every shipped spec (`specs/**`) on every shipped
//! hardware profile (`hardware/`) and on a committed calibrated profile (`tests/fixtures/hardware/tch-cpu.toml`,
//! one `trainbench calibrate --backend tch --device cpu --cpu-threads 1 --cpu-clock` of the development machine),
//! snapshotted in `golden/predict/gate/` with every number rounded to 10 significant digits. A prediction is a
//! pure function of the spec and the profile, so the snapshots hold on any host; a change of the model that
//! moves any prediction shows here, and a refactor of the model must leave them unchanged. The smoke and parity
//! specs are also snapshotted per layer on the calibrated profile (where the per-node terms of a calibration
//! show). A configuration a profile cannot predict (no peak for its precision, no link its topology names) is
//! recorded with its error.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

/// The committed calibrated profile, relative to the repository root.
const CALIBRATED: &str = "tests/fixtures/hardware/tch-cpu.toml";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.toml` under `dir`, sorted, relative to the repository root.
fn files(dir: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "toml") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join(dir), &mut out);
    let mut rel: Vec<PathBuf> = out.into_iter().map(|p| p.strip_prefix(root()).unwrap().to_path_buf()).collect();
    rel.sort();
    rel
}

/// `value` with every non-integer number rounded to 10 significant digits.
fn rounded(value: Value) -> Value {
    match value {
        Value::Number(n) if n.is_f64() => {
            let x = n.as_f64().unwrap();
            let r: f64 = format!("{x:.9e}").parse().unwrap();
            serde_json::Number::from_f64(r).map_or(Value::Null, Value::Number)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(rounded).collect()),
        Value::Object(fields) => Value::Object(fields.into_iter().map(|(k, v)| (k, rounded(v))).collect()),
        other => other,
    }
}

/// `value` without the phases' seconds by term (`layers[].forward.terms`, `layers[].backward.terms`), which came
/// after the gate was taken: the gate pins the prices, `predict::terms_tests` that the breakdowns add up to them.
fn without_breakdowns(value: Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.into_iter().map(without_breakdowns).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .filter(|(k, v)| !(k == "terms" && v.is_object()))
                .map(|(k, v)| (k, without_breakdowns(v)))
                .collect(),
        ),
        other => other,
    }
}

/// `value` without each prediction's `figures` (its memory fit, tokens/s and MFU), `interval` (its 80% range) and
/// `model_error` (the part of the range that is the model's own error), which came after the gate was taken and
/// are derived from the prices it pins; `tests/it/mfu_bound.rs` holds the figures, `predict::uncertainty` and
/// `tests/it/predict_cli.rs` the interval.
fn without_figures(value: Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.into_iter().map(without_figures).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .filter(|(k, _)| !matches!(k.as_str(), "figures" | "interval" | "model_error"))
                .map(|(k, v)| (k, without_figures(v)))
                .collect(),
        ),
        other => other,
    }
}

/// What `predict` prints for `spec` on `hardware` with `extra` arguments (rounded), or its error.
fn run(spec: &Path, hardware: &str, extra: &[&str]) -> Value {
    let mut c = Command::cargo_bin("trainbench").unwrap();
    c.current_dir(root()).env_remove("TRAINBENCH_HARDWARE");
    c.arg("predict").arg(spec).args(["--hardware", hardware, "--format", "json"]).args(extra);
    let o = c.output().unwrap();
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
        return serde_json::json!({ "exit": o.status.code(), "error": err });
    }
    without_figures(without_breakdowns(rounded(serde_json::from_slice(&o.stdout).unwrap())))
}

/// What `predict` prints for `spec` on `hardware`; where the profile has no peak for one of the spec's precisions
/// (the whole command refused), each precision on its own, so the others are still covered.
fn predict(spec: &Path, hardware: &str, per_layer: bool) -> Value {
    let extra: &[&str] = if per_layer { &["--per-layer"] } else { &[] };
    let all = run(spec, hardware, extra);
    if !all.get("error").and_then(Value::as_str).is_some_and(|e| e.contains("peak")) {
        return all;
    }
    let mut by = serde_json::Map::new();
    for p in ["fp32", "fp16", "bf16"] {
        let set = format!("sweep.precisions=[\"{p}\"]");
        by.insert(p.to_string(), run(spec, hardware, &[extra, &["--set", &set]].concat()));
    }
    serde_json::json!({ "by_precision": by })
}

/// The snapshot name of a spec: its path under `specs/` with `/` as `__`, without `.toml`.
fn name_of(spec: &Path) -> String {
    let s = spec.strip_prefix("specs").unwrap().with_extension("");
    s.to_string_lossy().replace(['/', '\\'], "__")
}

#[test]
fn predictions_of_every_shipped_spec_on_every_profile_are_unchanged() {
    let mut profiles: Vec<String> = files("hardware").iter().map(|p| p.to_string_lossy().into_owned()).collect();
    profiles.push(CALIBRATED.to_string());
    assert!(profiles.len() >= 7, "{profiles:?}");
    let specs = files("specs");
    assert!(specs.len() >= 20, "{specs:?}");
    let settings = crate::common::golden_settings("predict/gate");
    for spec in &specs {
        let mut all = serde_json::Map::new();
        for p in &profiles {
            all.insert(p.clone(), predict(spec, p, false));
        }
        let text = serde_json::to_string_pretty(&Value::Object(all)).unwrap();
        settings.bind(|| insta::assert_snapshot!(name_of(spec), text));
    }
}

#[test]
fn per_layer_predictions_of_the_small_specs_on_the_calibrated_profile_are_unchanged() {
    let settings = crate::common::golden_settings("predict/gate");
    for spec in files("specs").iter().filter(|s| s.starts_with("specs/smoke") || s.starts_with("specs/parity")) {
        let text = serde_json::to_string_pretty(&predict(spec, CALIBRATED, true)).unwrap();
        settings.bind(|| insta::assert_snapshot!(format!("per_layer__{}", name_of(spec)), text));
    }
}
