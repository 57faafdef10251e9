//! `trainbench import mlperf` (docs/mlperf.md): the hand-made fixture in MLCommons' published layout
//! (`tests/fixtures/mlperf/`) is read into results, the truncated log named with its file and line while the
//! others are imported, the olympic mean is MLPerf's; a report puts a user's run beside the imported ones; and a
//! log `run --mllog` writes, imported back, gives the same time to train and hyperparameters.
#![allow(clippy::unwrap_used)] // test helpers outside test functions

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use trainbench::mlperf::clock::epoch_ms;
use trainbench::mlperf::events::hyperparameters;
use trainbench::mlperf::score::olympic_of;
use trainbench::result::RunResult;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const SPEC: &str = "specs/mlperf/llama31_8b_smoke_mlperf.toml";

fn trainbench() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trainbench"));
    cmd.current_dir(ROOT);
    cmd
}

fn results_in(dir: &Path) -> Vec<RunResult> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && !p.ends_with("index.json"))
        .collect();
    files.sort();
    files.iter().map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap()).collect()
}

#[test]
fn the_fixture_imports_with_the_truncated_log_named_and_scores_as_mlperf_does() {
    let dir = tempfile::tempdir().unwrap();
    let out = trainbench()
        .args(["import", "mlperf", "tests/fixtures/mlperf", "--out"])
        .arg(dir.path())
        .assert()
        .code(2)
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("llama31_8b/result_5.txt:32: the JSON after `:::MLLOG` does not parse"), "{stderr}");
    assert!(stderr.contains("result_5.txt: no `run_stop` line"), "{stderr}");
    let imported = results_in(&dir.path().join("mlperf-llama31_8b"));
    assert_eq!(imported.len(), 5);
    let first = &imported[0];
    assert_eq!((first.run_id.as_str(), first.backend.as_str()), ("acme-2xh200.r0", "mlperf"));
    assert_eq!(first.plan.batch_size, 32);
    let record = first.mlperf.as_ref().unwrap();
    assert_eq!((record.run_s, record.converged), (3060.0, true));
    assert_eq!(record.submission["submission_org"], "Acme Labs");
    assert_eq!(record.system_description.as_ref().unwrap()["accelerator_model_name"], "NVIDIA H200");
    assert_eq!(first.environment.device.as_ref().unwrap().name, "NVIDIA H200");
    let score = olympic_of(&imported).unwrap();
    assert_eq!((score.runs, score.not_converged), (5, 1));
    assert!((score.mean_s.unwrap() - (3060.0 + 4560.0 + 4880.0) / 3.0).abs() < 1e-9);
}

#[test]
fn a_report_puts_a_users_run_beside_the_imported_ones() {
    let dir = tempfile::tempdir().unwrap();
    trainbench().args(["import", "mlperf", "tests/fixtures/mlperf", "--out"]).arg(dir.path()).assert().code(2);
    trainbench()
        .args(["run", SPEC, "--backend", "mock", "--quiet", "--set", "training.target.max_steps=32", "--out"])
        .arg(dir.path())
        .assert()
        .success();
    trainbench()
        .arg("report")
        .arg(dir.path().join("mlperf-llama31_8b"))
        .arg(dir.path().join("mlperf-llama31-8b-smoke"))
        .arg("--out")
        .arg(dir.path().join("report"))
        .assert()
        .success();
    let md = std::fs::read_to_string(dir.path().join("report/report.md")).unwrap();
    assert!(md.contains("acme-2xh200") && md.contains("mlperf-llama31-8b-smoke"), "{md}");
    assert!(md.contains("olympic 4166.67 s"), "{md}");
}

#[test]
fn a_written_log_imported_back_has_the_same_time_to_train_and_hyperparameters() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("org/results/this-machine/llama31_8b/result_{repeat}.txt");
    trainbench()
        .args(["run", SPEC, "--backend", "mock", "--quiet", "--set", "training.target.max_steps=32", "--out"])
        .arg(dir.path().join("runs"))
        .arg("--mllog")
        .arg(&log)
        .assert()
        .success();
    let written = results_in(&dir.path().join("runs/mlperf-llama31-8b-smoke")).remove(0);
    trainbench()
        .args(["import", "mlperf"])
        .arg(dir.path().join("org"))
        .arg("--out")
        .arg(dir.path().join("imported"))
        .assert()
        .success();
    let back = results_in(&dir.path().join("imported/mlperf-llama31_8b")).remove(0);
    let record = back.mlperf.unwrap();
    let target = written.metrics.as_ref().unwrap().time_to_target.as_ref().unwrap();
    // The mock backend misses the target: the run's span is its last evaluation's, and it did not converge.
    assert!(!record.converged && !target.reached);
    let last = target.curve.last().unwrap().elapsed_s;
    assert_eq!((record.run_s * 1000.0).round(), (last * 1000.0).round());
    assert_eq!(Some(record.run_start_ms), epoch_ms(&written.environment.started_at));
    for (key, value) in hyperparameters(&written, Some(32)) {
        assert_eq!(record.hyperparameters.get(key), Some(&value), "{key}");
    }
    assert_eq!(
        (back.plan.batch_size, back.plan.seed, back.plan.optimizer),
        (16, written.plan.seed, written.plan.optimizer)
    );
}

#[test]
fn compare_pairs_imported_results_with_a_users_run_of_the_same_benchmark_on_time_to_train() {
    let dir = tempfile::tempdir().unwrap();
    trainbench().args(["import", "mlperf", "tests/fixtures/mlperf", "--out"]).arg(dir.path()).assert().code(2);
    // A target the mock reaches at its first evaluation, so the user's run has a time to train.
    let user = dir.path().join("user");
    trainbench()
        .args(["run", SPEC, "--backend", "mock", "--quiet", "--set", "training.target.value=100", "--out"])
        .arg(&user)
        .assert()
        .success();
    let mine = results_in(&user.join("mlperf-llama31-8b-smoke")).remove(0);
    let my_time = mine.metrics.as_ref().unwrap().time_to_target.as_ref().unwrap().time_to_target_s.unwrap();
    let out = trainbench()
        .arg("compare")
        .arg(dir.path().join("mlperf-llama31_8b"))
        .arg(user.join("mlperf-llama31-8b-smoke"))
        .args(["--format", "json"])
        .assert()
        .success()
        .get_output()
        .clone();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pairs = json["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 1, "{json:#}");
    let pair = &pairs[0];
    assert_eq!((pair["verdict"].as_str(), pair["spec"].as_str()), (Some("time_to_train"), Some("mlperf:llama31_8b")));
    // The published side's median over its four converged runs, the user's own time to train.
    let change = &pair["time_to_target"];
    assert_eq!(change["baseline"].as_f64(), Some((3060.0 + 4560.0) / 2.0));
    assert_eq!(change["candidate"].as_f64(), Some(my_time));
    assert!(json["only_in_baseline"].as_array().unwrap().is_empty(), "{json:#}");
    assert!(json["only_in_candidate"].as_array().unwrap().is_empty(), "{json:#}");
    let notes = pair["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect::<Vec<_>>().join("\n");
    assert!(notes.contains("olympic mean") && notes.contains("4/5 runs converged"), "{notes}");
    // The table says it too.
    let table = trainbench()
        .arg("compare")
        .arg(dir.path().join("mlperf-llama31_8b"))
        .arg(user.join("mlperf-llama31-8b-smoke"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert!(String::from_utf8_lossy(&table).contains("time to train (MLPerf)"));
}
