//! Test support for the spec-run tests (`spec_runs_tch`, `spec_runs_wgpu`): train the one run a spec expands to
//! on a real backend, check what every backend's result must show, and build its shape snapshot.

use std::path::Path;
use std::time::Instant;

use trainbench::check::shape_of;
use trainbench::plan::PlacementOverride;
use trainbench::result::{RunOutcome, RunResult, result_schema};
use trainbench::runner::{RunnerOptions, Suite, run_suite};
use trainbench::spec::diagnostics::render_text;
use trainbench::spec::wire::BackendChoice;
use trainbench::spec::{Overrides, load_spec};

/// Errors of `json` against `schema/result.schema.json`, each as `<error> at <instance path>`; empty when valid.
pub fn result_schema_errors(json: &serde_json::Value) -> Vec<String> {
    let schema = result_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    validator.iter_errors(json).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

/// A spec trained by [`train_spec`].
pub struct TrainedSpec {
    /// The result, as read back from its file (written in a temporary folder, gone once trained).
    pub result: RunResult,
    /// Wall-clock seconds of the whole suite.
    pub wall_s: f64,
}

/// Train spec `path` (`rel`: its name in messages) under `overrides` on `backend`, which must leave exactly one
/// run. Checks that its result file validates against the result schema, is the run the runner reported, and
/// completed on that backend with `iterations` measured steps, a positive finite throughput, a finite first loss,
/// and measured fp32 gradient and weight bytes equal to 4 x the analysis's parameters (and buffers).
pub fn train_spec(
    path: &Path,
    rel: &str,
    overrides: &[String],
    backend: BackendChoice,
    iterations: usize,
) -> TrainedSpec {
    super::link_backends();
    let overrides = Overrides::parse(overrides).map_err(|d| render_text(&d)).unwrap();
    let spec = load_spec(path, &overrides).map_err(|d| format!("{rel}:\n{}", render_text(&d))).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let opts = RunnerOptions { out_dir: tmp.path().to_path_buf(), ..Default::default() };
    let suite = Suite::placed(&spec, PlacementOverride { backend: Some(backend), device: None });
    let mut files = Vec::new();
    let started = Instant::now();
    let report = run_suite(&suite, &opts, &mut |r, p| files.push((r.run_id.clone(), p.to_path_buf()))).unwrap();
    let wall_s = started.elapsed().as_secs_f64();
    assert_eq!(report.results.len(), 1, "{rel}: the overrides must leave exactly one run");
    assert_eq!(files.len(), 1, "{rel}: one result file");
    let (run_id, file) = files.remove(0);

    // The file on disk validates against the result schema and is the result the runner returned.
    let text = std::fs::read_to_string(&file).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let errors = result_schema_errors(&json);
    assert!(errors.is_empty(), "{rel}: {} does not validate:\n{}", file.display(), errors.join("\n"));
    let r: RunResult = serde_json::from_value(json).unwrap();
    assert_eq!(r.run_id, run_id);

    assert_eq!(r.outcome, RunOutcome::Completed, "{rel}: run {run_id} did not complete: {:?}", r.outcome);
    assert_eq!(serde_json::to_value(backend).unwrap(), r.backend.as_str(), "{rel}: backend");
    let m = r.metrics.as_ref().unwrap();
    if r.plan.target.is_none() {
        assert_eq!(m.step_times_s.len(), iterations, "{rel}: measured iterations");
    } else {
        // A run with a target trains until the target or its budget, not for `run.iterations`.
        let t = m.time_to_target.as_ref().unwrap();
        assert!(t.reached, "{rel}: the target was not reached: {}", t.stopped);
    }
    assert!(m.throughput.samples_per_s > 0.0 && m.throughput.samples_per_s.is_finite(), "{rel}: throughput");
    let loss = m.loss.as_ref().unwrap();
    assert!(loss.all_finite && loss.first.is_some_and(f64::is_finite), "{rel}: a loss was not finite: {loss:?}");

    // Measured tensor bytes against the static analysis: fp32 weights are 4 bytes per parameter and buffer
    // (batch-norm running statistics), gradients 4 bytes per trained parameter.
    let a = r.analysis.as_ref().unwrap();
    let mem = &m.memory.measured;
    // A frozen base (LoRA) holds no gradient: 4 bytes per trained parameter.
    let trained = a.trainable_parameters.unwrap_or(a.parameters);
    assert_eq!(mem.gradients_bytes, 4 * trained, "{rel}: gradient bytes vs 4 x analysis trainable parameters");
    assert_eq!(mem.weights_bytes, 4 * (a.parameters + a.buffers), "{rel}: weight bytes vs 4 x (parameters + buffers)");
    TrainedSpec { result: r, wall_s }
}

/// The snapshot of a result's shape: `{run id: {spec_sha256, fields}}`, `fields` without the keys in `omit`.
pub fn shape_snapshot(r: &RunResult, omit: &[&str]) -> serde_json::Value {
    let (run_id, entry) = shape_entry(r, omit);
    let mut snapshot = serde_json::Map::new();
    snapshot.insert(run_id, entry);
    serde_json::Value::Object(snapshot)
}

/// One run's snapshot entry: its spec hash and its shape without the fields in `omit`. The host's NVML GPU
/// inventory (`environment.gpus.*`) is folded into one placeholder: it says whether the machine running the
/// tests has NVIDIA GPUs, not what the run produced, and the suite must pass on machines with and without them.
pub fn shape_entry(r: &RunResult, omit: &[&str]) -> (String, serde_json::Value) {
    let mut shape = shape_of(r);
    shape.fields.retain(|k, _| !omit.contains(&k.as_str()) && !k.starts_with("environment.gpus."));
    shape.fields.insert("environment.gpus".into(), "[the host's NVML inventory]".into());
    let mut entry = serde_json::Map::new();
    entry.insert("spec_sha256".into(), r.environment.spec_sha256.clone().into());
    entry.insert("fields".into(), serde_json::to_value(&shape.fields).unwrap());
    (r.run_id.clone(), entry.into())
}

/// `trainbench predict FILE --hardware h100 --format json` in `dir`, which must succeed: its report.
pub fn predict_json(dir: &std::path::Path, file: &str) -> serde_json::Value {
    let out = assert_cmd::Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir)
        .args(["predict", file, "--hardware", "h100", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "predict {file}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}
