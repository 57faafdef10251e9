//! Repeats in processes of their own (`run.isolation`): `trainbench run` hands each repeat to a `trainbench
//! worker` process, records what it reports, and survives a worker that dies.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::Path;

use assert_cmd::Command;
use trainbench::result::{RunOutcome, RunResult};

const SPEC: &str = r#"
version = 1
name = "isolated"
[model]
family = "mlp"
inputs = 16
hidden = [32]
classes = 4
[topology]
backend = "mock"
[sweep]
batch_sizes = [2, 4]
[run]
warmup = 2
iterations = 10
repeats = 3
"#;

/// Test hooks: the mock backend hangs in repeat 2 (or 0), and that repeat's worker is hung once silent for 1 s
/// past the timeout (every other worker keeps the default grace of 60 s, so a healthy worker that is slow to
/// start on a loaded machine is not taken for a hung one).
const HANG_REPEAT_2: &str = r#"{"mock_hang_repeat": 2, "hung_grace_s": 1}"#;
const HANG_REPEAT_0: &str = r#"{"mock_hang_repeat": 0, "hung_grace_s": 1}"#;

/// Run the spec with extra arguments; returns the exit code and the results by run id.
fn run(dir: &Path, extra: &[&str]) -> (i32, Vec<RunResult>) {
    let spec = dir.join("spec.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let out = dir.join("out");
    let output = Command::cargo_bin("trainbench")
        .unwrap()
        .args(["run", "--quiet", "--backend", "mock", "--out"])
        .arg(&out)
        .arg(&spec)
        .args(extra)
        .output()
        .unwrap();
    let mut results: Vec<RunResult> = std::fs::read_dir(out.join("isolated"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("isolated."))
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    results.sort_by(|a, b| a.run_id.cmp(&b.run_id));
    (output.status.code().unwrap_or(-1), results)
}

fn pid(r: &RunResult) -> u32 {
    r.environment.process.unwrap().pid
}

#[test]
fn each_repeat_runs_in_a_process_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (code, results) = run(dir.path(), &[]);
    assert_eq!(code, 0);
    assert_eq!(results.len(), 6);
    assert!(results.iter().all(|r| r.outcome == RunOutcome::Completed && r.metrics.is_some()));
    assert!(results.iter().all(|r| r.environment.process.unwrap().own_process_per_repeat));
    // Both batch sizes of a repeat share its process; no two repeats share one, and none ran in the test.
    for repeat in 0..3 {
        let of_repeat: BTreeSet<u32> = results.iter().filter(|r| r.plan.repeat == repeat).map(pid).collect();
        assert_eq!(of_repeat.len(), 1, "repeat {repeat}");
    }
    let all: BTreeSet<u32> = results.iter().map(pid).collect();
    assert_eq!(all.len(), 3);
    assert!(!all.contains(&std::process::id()));
}

#[test]
fn shared_isolation_runs_every_repeat_in_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let (code, results) = run(dir.path(), &["--set", "run.isolation=\"shared\""]);
    assert_eq!(code, 0);
    assert_eq!(results.len(), 6);
    let all: BTreeSet<u32> = results.iter().map(pid).collect();
    assert_eq!(all.len(), 1);
    assert!(results.iter().all(|r| !r.environment.process.unwrap().own_process_per_repeat));
}

#[test]
fn a_worker_that_dies_fails_its_repeat_and_the_sweep_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (code, results) = run(dir.path(), &["--test-hooks", r#"{"mock_abort_repeat": 1}"#]);
    // A failed run makes `run` exit 1; every other run is kept.
    assert_eq!(code, 1);
    assert_eq!(results.len(), 6);
    for r in &results {
        match r.plan.repeat {
            1 => match &r.outcome {
                RunOutcome::Failed { message } => assert!(message.contains("worker process"), "{message}"),
                other => panic!("{}: {other:?}", r.run_id),
            },
            _ => assert_eq!(r.outcome, RunOutcome::Completed, "{}", r.run_id),
        }
    }
}

#[test]
fn compare_notes_repeats_that_shared_a_process() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    let isolated = dir.path().join("isolated");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::create_dir_all(&isolated).unwrap();
    run(&shared, &["--set", "run.isolation=\"shared\""]);
    run(&isolated, &[]);
    let output = Command::cargo_bin("trainbench")
        .unwrap()
        .args(["compare", "--format", "json"])
        .arg(shared.join("out"))
        .arg(isolated.join("out"))
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let pairs = json["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 2);
    for p in pairs {
        let notes: Vec<&str> = p["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        assert!(notes.iter().any(|n| n.starts_with("baseline: its 3 repeats ran in 1 process(es)")), "{notes:?}");
        assert!(!notes.iter().any(|n| n.starts_with("candidate:")), "{notes:?}");
        assert!(p["step_time"]["noise_floor"].as_f64().is_some());
    }
}

#[test]
fn a_worker_hung_past_the_timeout_is_killed_and_the_sweep_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (code, results) = run(dir.path(), &["--set", "run.timeout_s=0.5", "--test-hooks", HANG_REPEAT_2]);
    assert_eq!(code, 1);
    assert_eq!(results.len(), 6);
    for r in &results {
        match (r.plan.repeat, &r.outcome) {
            // Killed by the supervisor after the timeout and the hook's grace (the 60 s default would say so).
            (2, RunOutcome::Failed { message }) if r.plan.batch_size == 2 => {
                assert!(message.contains("killed as hung"), "{message}");
                assert!(message.contains("past the run's 0.5 s timeout and a 1 s grace"), "{message}");
            }
            (2, RunOutcome::Failed { message }) => assert!(message.starts_with("not run"), "{message}"),
            (0 | 1, RunOutcome::Completed) => {}
            (_, other) => panic!("{}: {other:?}", r.run_id),
        }
    }
    // The sweep went on: the hung worker's repeat ran in a process of its own, like the others.
    let pids: BTreeSet<u32> = results.iter().map(pid).collect();
    assert_eq!(pids.len(), 3);
}

#[test]
fn a_single_repeat_with_a_timeout_runs_in_a_worker_so_a_hang_can_be_killed() {
    let dir = tempfile::tempdir().unwrap();
    let (code, results) =
        run(dir.path(), &["--set", "run.repeats=1", "--set", "run.timeout_s=0.5", "--test-hooks", HANG_REPEAT_0]);
    assert_eq!(code, 1);
    assert_eq!(results.len(), 2);
    // In a worker (in this process the hang would never end), killed by its supervisor; the second run never ran.
    assert!(results.iter().all(|r| r.environment.process.unwrap().own_process_per_repeat), "{results:?}");
    match (&results[0].outcome, &results[1].outcome) {
        (RunOutcome::Failed { message: first }, RunOutcome::Failed { message: second }) => {
            assert!(first.contains("killed as hung") && first.contains("a 1 s grace"), "{first}");
            assert!(second.starts_with("not run"), "{second}");
        }
        other => panic!("{other:?}"),
    }
    // Without a timeout a single repeat stays in the `trainbench run` process.
    let dir = tempfile::tempdir().unwrap();
    let (code, results) = run(dir.path(), &["--set", "run.repeats=1"]);
    assert_eq!(code, 0);
    assert!(results.iter().all(|r| !r.environment.process.unwrap().own_process_per_repeat));
}

#[test]
fn a_stop_inside_a_worker_stops_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    // Plan 1 is batch 2, repeat 1 (batch sizes outermost): its worker is told to stop after 5 iterations.
    let (code, results) = run(dir.path(), &["--test-hooks", r#"{"interrupt_at": [1, 5]}"#]);
    assert_eq!(code, 1);
    let outcomes: Vec<(&str, &str)> = results.iter().map(|r| (r.run_id.as_str(), r.outcome.status())).collect();
    assert_eq!(
        outcomes,
        [
            ("isolated.b2.fp32.1x1.r0", "completed"),
            ("isolated.b2.fp32.1x1.r1", "interrupted"),
            ("isolated.b4.fp32.1x1.r0", "completed"),
        ]
    );
    assert_eq!(results[1].outcome, RunOutcome::Interrupted { reason: "interrupted by user".into() });
}
