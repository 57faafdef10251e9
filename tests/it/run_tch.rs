//! End to end through the real tch backend on the CPU (feature `tch`): a tiny spec trains, its result file
//! validates against the result schema and carries the figures the backend and collectors provide.
#![allow(clippy::unwrap_used)]

use trainbench::plan::PlacementOverride;
use trainbench::result::{RunOutcome, RunResult};
use trainbench::runner::{RunnerOptions, Suite, run_suite};
use trainbench::spec::diagnostics::render_text;
use trainbench::spec::wire::BackendChoice;
use trainbench::spec::{Overrides, SpecValidator};

const SPEC: &str = r#"
version = 1
name = "tch-tiny"
[model]
family = "mlp"
inputs = 64
hidden = [128]
classes = 10
[topology]
backend = "tch"
device = "cpu"
[sweep]
batch_sizes = [16]
[run]
warmup = 3
iterations = 20
sample_interval_ms = 10
"#;

#[test]
fn tiny_mlp_trains_on_the_cpu_and_its_result_validates() {
    let checked = SpecValidator::new().unwrap().check_bytes("tch-tiny.toml", SPEC.as_bytes(), None, &Overrides::none());
    let spec = checked.into_result().map_err(|d| render_text(&d)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let opts = RunnerOptions { out_dir: dir.path().to_path_buf(), ..Default::default() };
    let suite = Suite::placed(&spec, PlacementOverride { backend: Some(BackendChoice::Tch), device: None });
    crate::common::link_backends();
    let report = run_suite(&suite, &opts, &mut |_, _| {}).unwrap();
    assert_eq!(report.results.len(), 1);
    let path = dir.path().join("tch-tiny/tch-tiny.b16.fp32.1x1.r0.json");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let errors = crate::common::spec_run::result_schema_errors(&json);
    assert!(errors.is_empty(), "the result breaks the result schema:\n{}", errors.join("\n"));
    let r: RunResult = serde_json::from_value(json).unwrap();
    assert_eq!(r.outcome, RunOutcome::Completed);
    assert_eq!(r.backend, "tch");
    assert!(r.environment.library_versions.contains_key("libtorch"));
    let m = r.metrics.unwrap();
    assert_eq!(m.step_times_s.len(), 20);
    assert!(m.throughput.samples_per_s > 0.0);
    assert!(m.flops.peak_source.as_deref().unwrap().starts_with("backend:"));
    assert!(m.flops.fraction.unwrap() > 0.0);
    assert!(m.memory.measured.weights_bytes > 0);
    // 20 steps of this model take about 2 ms, less than one sampling period: the samples taken at the start
    // and the end of the run still bracket it.
    assert!(m.cpu.get().unwrap().busy_cores > 0.0);
    let loss = m.loss.unwrap();
    assert!(loss.all_finite && loss.first.unwrap() > 0.0);
}
