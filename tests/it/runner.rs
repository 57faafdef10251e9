//! Runner tests with the mock backend: results written and schema-valid, out-of-memory outcomes that keep the
//! sweep going, interrupts that keep finished runs, timeouts, atomic writes.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use trainbench::result::{INDEX_FILE, RunOutcome, RunResult, SuiteIndex};
use trainbench::runner::{RunnerOptions, Suite, run_suite, run_suite_with};
use trainbench::spec::diagnostics::render_text;
use trainbench::spec::{Overrides, SpecValidator};
use trainbench_contract::mock::MockConfig;
use trainbench_contract::{
    Backend, BackendError, BackendKind, DeviceInfo, PhaseTimes, RawMeasurements, RunContext, RunPlan,
};
use trainbench_graph::Graph;

fn suite(extra: &str) -> Suite {
    let text = format!(
        r#"
version = 1
name = "tiny"
[model]
family = "mlp"
inputs = 32
hidden = [64]
classes = 10
[topology]
backend = "mock"
[run]
warmup = 3
iterations = 30
{extra}
"#
    );
    let checked = SpecValidator::new().unwrap().check_bytes("tiny.toml", text.as_bytes(), None, &Overrides::none());
    let spec = checked.into_result().map_err(|d| render_text(&d)).unwrap();
    Suite::from_validated(&spec)
}

fn options(out: &Path) -> RunnerOptions {
    RunnerOptions { out_dir: out.to_path_buf(), ..RunnerOptions::default() }
}

fn read(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn assert_valid(instance: &serde_json::Value) {
    let errors = crate::common::spec_run::result_schema_errors(instance);
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn results_are_written_valid_and_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let s = suite("[sweep]\nbatch_sizes = [4, 8]");
    let mut seen = Vec::new();
    let report =
        run_suite(&s, &options(dir.path()), &mut |r, p| seen.push((r.run_id.clone(), p.to_path_buf()))).unwrap();
    assert_eq!(report.results.len(), 2);
    assert!(!report.interrupted);
    for (id, path) in &seen {
        assert_eq!(path, &dir.path().join("tiny").join(format!("{id}.json")));
        let json = read(path);
        assert_valid(&json);
        let r: RunResult = serde_json::from_value(json).unwrap();
        assert_eq!(r.outcome, RunOutcome::Completed);
        assert_eq!(r.backend, "mock");
        let m = r.metrics.as_ref().unwrap();
        assert_eq!(m.step_times_s.len(), 30);
        assert!(m.throughput.samples_per_s > 0.0);
        assert!(m.flops.fraction.unwrap() > 0.0 && m.flops.fraction.unwrap() < 1.0);
        assert_eq!(m.steady_state.method, "mser-5");
        assert!(m.steady_state.start_index < 15);
        assert_eq!(r.environment.spec_sha256.len(), 64);
        assert!(r.environment.library_versions.contains_key("mock"));
        assert!(r.analysis.as_ref().unwrap().parameters > 0);
        assert!(m.memory.measured.peak_allocated_bytes.unwrap() > 0);
    }
    let index: SuiteIndex = serde_json::from_value(read(&dir.path().join("tiny").join(INDEX_FILE))).unwrap();
    let ids: Vec<&str> = index.runs.iter().map(|e| e.run_id.as_str()).collect();
    assert_eq!(ids, ["tiny.b4.fp32.1x1.r0", "tiny.b8.fp32.1x1.r0"]);
    // Atomic writes leave nothing but the results and the index.
    let mut names: Vec<String> = std::fs::read_dir(dir.path().join("tiny"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["index.json", "tiny.b4.fp32.1x1.r0.json", "tiny.b8.fp32.1x1.r0.json"]);
}

#[test]
fn out_of_memory_is_recorded_and_larger_batches_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let s = suite("[sweep]\nbatch_sizes = [4, 20000, 40000]\nprecisions = [\"fp32\", \"bf16\"]");
    let mut opts = options(dir.path());
    // The analysis estimates ~18.8 MB for the fp32 step at batch 20000 and ~9.4 MB in bf16 (activations
    // dominate and halve); a 12 MiB mock device fits the latter only.
    opts.mock = MockConfig { memory_bytes: 12 << 20, ..MockConfig::default() };
    let report = run_suite(&s, &opts, &mut |_, _| {}).unwrap();
    let outcomes: Vec<&str> = report.results.iter().map(|r| r.outcome.status()).collect();
    // The planner puts batch sizes outermost: b4 fp32, b4 bf16, b20000 fp32, b20000 bf16, b40000 fp32, ...
    assert_eq!(outcomes, ["completed", "completed", "out_of_memory", "completed", "skipped", "out_of_memory"]);
    match &report.results[2].outcome {
        RunOutcome::OutOfMemory { batch_size, message } => {
            assert_eq!(*batch_size, 20000);
            assert!(message.contains("mock device"));
        }
        other => panic!("{other:?}"),
    }
    match &report.results[4].outcome {
        RunOutcome::Skipped { reason } => assert!(reason.contains("batch size 20000"), "{reason}"),
        other => panic!("{other:?}"),
    }
    for r in &report.results {
        assert_valid(&serde_json::to_value(r).unwrap());
        assert!(dir.path().join("tiny").join(format!("{}.json", r.run_id)).exists());
    }
}

#[test]
fn interrupt_keeps_finished_runs_and_stops_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let s = suite("[sweep]\nbatch_sizes = [4, 8, 16]");
    let mut opts = options(dir.path());
    opts.test_hooks.interrupt_at = Some((1, 10)); // during the second run: 3 warm-up + 7 measured iterations
    let report = run_suite(&s, &opts, &mut |_, _| {}).unwrap();
    assert!(report.interrupted);
    assert_eq!(report.results.len(), 2);
    assert_eq!(report.results[0].outcome, RunOutcome::Completed);
    assert_eq!(report.results[1].outcome, RunOutcome::Interrupted { reason: "interrupted by user".into() });
    assert_eq!(report.results[1].metrics.as_ref().unwrap().step_times_s.len(), 7);
    let index: SuiteIndex = serde_json::from_value(read(&dir.path().join("tiny").join(INDEX_FILE))).unwrap();
    assert_eq!(index.runs.len(), 2);
    assert!(!dir.path().join("tiny/tiny.b16.fp32.1x1.r0.json").exists());
}

#[test]
fn timeout_interrupts_one_run_and_the_sweep_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let s = suite("timeout_s = 1e-9\n[sweep]\nbatch_sizes = [4, 8]");
    let report = run_suite(&s, &options(dir.path()), &mut |_, _| {}).unwrap();
    assert!(!report.interrupted);
    assert_eq!(report.results.len(), 2);
    for r in &report.results {
        assert_eq!(r.outcome, RunOutcome::Interrupted { reason: "timeout after 0.000000001 s".into() });
        assert!(r.metrics.is_none());
    }
}

#[test]
fn collectors_can_be_switched_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(dir.path());
    opts.no_collectors = true;
    let report = run_suite(&suite(""), &opts, &mut |_, _| {}).unwrap();
    let m = report.results[0].metrics.as_ref().unwrap();
    assert_eq!(m.cpu.get(), None);
    assert_eq!(serde_json::to_value(&m.cpu).unwrap()["reason"], "collectors disabled (--no-collectors)");
    assert!(serde_json::to_value(&m.gpu).unwrap()["reason"].as_str().unwrap().contains("not an NVIDIA GPU"));
}

#[test]
fn a_backend_that_is_not_built_stops_before_any_run() {
    // The stub a build without `--features tch` has, whatever this build has.
    let dir = tempfile::tempdir().unwrap();
    let stub = Box::new(trainbench::backend_registry::Unavailable::not_built(BackendKind::Tch));
    let err = run_suite_with(&suite(""), &options(dir.path()), stub, &mut |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("--features tch"), "{err}");
    assert!(!dir.path().join("tiny").exists());
}

/// A backend that stops itself early (as tch does on its own timeout check) or fails.
struct SelfStopping;
impl Backend for SelfStopping {
    fn kind(&self) -> BackendKind {
        BackendKind::Mock
    }
    fn name(&self) -> &'static str {
        "self-stopping"
    }
    fn devices(&self) -> Vec<DeviceInfo> {
        Vec::new()
    }
    fn check(&self, _plan: &RunPlan, _graph: &Graph) -> Result<(), BackendError> {
        Ok(())
    }
    fn run_in(
        &mut self,
        plan: &RunPlan,
        _graph: &Graph,
        ctx: &mut RunContext<'_>,
    ) -> Result<RawMeasurements, BackendError> {
        if plan.batch_size == 8 {
            return Err(BackendError::Framework("boom".into()));
        }
        let p = PhaseTimes { total_s: 0.01, forward_s: 0.01, ..PhaseTimes::default() };
        ctx.probe.step(0, true, &p);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let steps = trainbench_contract::steplog::StepLog::of([(p, Some(1.0))]);
        Ok(RawMeasurements { steps, interrupted: true, ..RawMeasurements::default() })
    }
}

#[test]
fn backend_side_timeouts_and_failures_are_recorded_and_the_sweep_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let s = suite("timeout_s = 0.001\n[sweep]\nbatch_sizes = [4, 8, 16]");
    let report = run_suite_with(&s, &options(dir.path()), Box::new(SelfStopping), &mut |_, _| {}).unwrap();
    assert!(!report.interrupted);
    let outcomes: Vec<&RunOutcome> = report.results.iter().map(|r| &r.outcome).collect();
    assert_eq!(outcomes[0], &RunOutcome::Interrupted { reason: "timeout after 0.001 s".into() });
    assert_eq!(outcomes[1], &RunOutcome::Failed { message: "boom".into() });
    assert_eq!(outcomes[2], &RunOutcome::Interrupted { reason: "timeout after 0.001 s".into() });
    assert_eq!(report.results[0].metrics.as_ref().unwrap().step_times_s, vec![0.01]);
}

/// A plan whose mesh splits the model reaching the runner (`run` refuses it first) fails without training,
/// and its result records the mesh: the degrees, each rank's coordinates and the pipeline's chunks.
#[test]
fn a_split_model_fails_unrun_and_its_result_records_the_mesh() {
    let text = r#"
version = 1
name = "meshed"
[model]
family = "gpt"
layers = 4
d_model = 32
heads = 4
ffn = 64
vocab = 64
seq_len = 8
[sweep]
batch_sizes = [4]
[topology]
backend = "mock"
devices_per_node = 4
tensor_parallel = 2
pipeline_parallel = 2
[run]
warmup = 1
iterations = 2
isolation = "shared"
"#;
    let checked = SpecValidator::new().unwrap().check_bytes("meshed.toml", text.as_bytes(), None, &Overrides::none());
    let spec = checked.into_result().map_err(|d| render_text(&d)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    run_suite(&Suite::from_validated(&spec), &options(dir.path()), &mut |_, p| seen.push(p.to_path_buf())).unwrap();
    let json = read(&seen[0]);
    assert_valid(&json);
    let r: RunResult = serde_json::from_value(json.clone()).unwrap();
    assert!(
        matches!(&r.outcome, RunOutcome::Failed { message } if message.contains("runs no pipeline stages")),
        "{:?}",
        r.outcome
    );
    assert!(r.metrics.is_none());
    let mesh = &json["plan"]["mesh"];
    assert_eq!((mesh["tensor_parallel"].as_u64(), mesh["pipeline_parallel"].as_u64()), (Some(2), Some(2)));
    assert_eq!(mesh["data_parallel"], 1);
    assert_eq!(mesh["pipeline_schedule"], "1f1b");
    assert_eq!(mesh["ranks"][3], serde_json::json!({"dp": 0, "pp": 1, "tp": 1}));
    let stages = &r.analysis.as_ref().unwrap().pipeline_stages;
    assert_eq!(stages.iter().map(|s| (s.stage, s.blocks)).collect::<Vec<_>>().len(), 2);
    assert_eq!(stages.iter().map(|s| s.parameters).sum::<u64>(), r.analysis.as_ref().unwrap().parameters);
}
