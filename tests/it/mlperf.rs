//! MLPerf Training logs (docs/mlperf.md): `trainbench run --mllog` writes a `:::MLLOG` log per run on the result's
//! own clock (checked line by line against the JSON result on the mock backend); the shipped smoke
//! `llama31_8b` spec trained on tch reaches its log-perplexity target, the shipped smoke `dlrm_dcnv2` spec its AUC
//! target on synthetic clicks, and MLCommons' compliance checker (`mlperf-logging`, installed by scripts/env.sh)
//! prints SUCCESS on each log; the spec-level refusals.
//! Without the checker's Python package the checker test skips with a notice, and fails under `CI=true`.
#![allow(clippy::unwrap_used)] // test helpers outside test functions

use std::path::Path;
#[cfg(feature = "tch")]
use std::path::PathBuf;

use assert_cmd::Command;
use trainbench::mlperf::clock::epoch_ms;
use trainbench::mlperf::line::{EventType, MllogLine, parse_line};
use trainbench::result::RunResult;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const SPEC: &str = "specs/mlperf/llama31_8b_smoke_mlperf.toml";
const DLRM_SPEC: &str = "specs/mlperf/dlrm_dcnv2_smoke_mlperf.toml";

fn trainbench() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trainbench"));
    cmd.current_dir(ROOT);
    cmd
}

fn read_log(path: &Path) -> Vec<MllogLine> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().map(|l| parse_line(l).unwrap().unwrap()).collect()
}

fn only_result(dir: &Path) -> RunResult {
    result_of(dir, "mlperf-llama31-8b-smoke")
}

fn result_of(dir: &Path, spec_name: &str) -> RunResult {
    let folder = dir.join(spec_name);
    let file = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json") && !p.ends_with("index.json"))
        .unwrap();
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

fn keys(lines: &[MllogLine]) -> Vec<&str> {
    lines.iter().map(|l| l.key.as_str()).collect()
}

fn time_of(lines: &[MllogLine], key: &str) -> i64 {
    lines.iter().find(|l| l.key == key).unwrap().time_ms
}

#[test]
fn a_mock_run_writes_a_log_on_the_results_own_clock() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sys/llama31_8b/result_{repeat}.txt");
    trainbench()
        .args(["run", SPEC, "--backend", "mock", "--quiet", "--set", "training.target.max_steps=48", "--out"])
        .arg(dir.path())
        .arg("--mllog")
        .arg(&log)
        .assert()
        .success();
    let lines = read_log(&dir.path().join("sys/llama31_8b/result_0.txt"));
    let result = only_result(dir.path());
    let k = keys(&lines);
    assert_eq!(k[..3], ["cache_clear", "init_start", "submission_benchmark"]);
    for key in ["submission_org", "submission_division", "submission_platform", "global_batch_size", "opt_name"] {
        assert_eq!(k.iter().filter(|x| **x == key).count(), 1, "{key} once in {k:?}");
    }
    let at = |key: &str| k.iter().position(|x| *x == key).unwrap();
    assert!(at("init_stop") < at("run_start") && at("run_start") < at("block_start") && at("run_stop") == k.len() - 1);
    let value = |key: &str| lines.iter().find(|l| l.key == key).unwrap().value.clone();
    assert_eq!(value("submission_benchmark"), "llama31_8b");
    assert_eq!(value("global_batch_size"), 16);
    assert_eq!(value("max_sequence_length"), 32);
    assert_eq!(value("opt_adamw_beta_2"), 0.95);
    assert_eq!(value("train_samples"), 1024);
    assert_eq!(value("eval_samples"), 128);
    // The mock backend never reaches log perplexity 0.5: the run stops on its budget, `aborted`.
    let stop = lines.last().unwrap();
    assert_eq!((stop.event_type, stop.meta("status").unwrap().as_str()), (EventType::IntervalEnd, Some("aborted")));
    // Every instant is one the result records.
    let target = result.metrics.as_ref().unwrap().time_to_target.as_ref().unwrap();
    let start = time_of(&lines, "run_start");
    assert_eq!(Some(start), epoch_ms(&result.environment.started_at));
    let evals: Vec<&MllogLine> = lines.iter().filter(|l| l.key == "eval_accuracy").collect();
    assert_eq!(evals.len(), target.curve.len());
    for (line, point) in evals.iter().zip(&target.curve) {
        assert_eq!(line.time_ms - start, (point.elapsed_s * 1000.0).round() as i64);
        assert_eq!(line.value.as_f64(), Some(point.loss));
        assert_eq!(line.meta("samples_count").unwrap().as_u64(), Some(point.step * 16));
    }
    let last = target.curve.last().unwrap();
    assert_eq!(stop.time_ms - start, (last.elapsed_s * 1000.0).round() as i64);
}

#[test]
fn a_mock_dlrm_dcnv2_run_logs_its_auc_and_schedule_keys() {
    let dir = tempfile::tempdir().unwrap();
    trainbench()
        .args(["run", DLRM_SPEC, "--backend", "mock", "--quiet", "--set", "training.target.max_steps=32", "--out"])
        .arg(dir.path())
        .assert()
        .success();
    let result = result_of(dir.path(), "mlperf-dlrm-dcnv2-smoke");
    let log = dir
        .path()
        .join(format!("mlperf-dlrm-dcnv2-smoke/mlperf/results/{}/dlrm_dcnv2/result_0.txt", result.plan.config));
    let lines = read_log(&log);
    let value = |key: &str| lines.iter().find(|l| l.key == key).unwrap().value.clone();
    assert_eq!(value("submission_benchmark"), "dlrm_dcnv2");
    assert_eq!((value("train_samples"), value("eval_samples")), (14336.into(), 2048.into()));
    for key in ["opt_learning_rate_warmup_steps", "opt_learning_rate_decay_start_step", "opt_learning_rate_decay_steps"]
    {
        assert_eq!(value(key), 0, "{key}");
    }
    // The mock scores every click alike: an AUC of one half, logged as the evaluation's value.
    let target = result.metrics.as_ref().unwrap().time_to_target.as_ref().unwrap();
    let evals: Vec<&MllogLine> = lines.iter().filter(|l| l.key == "eval_accuracy").collect();
    assert_eq!(evals.len(), target.curve.len());
    for (line, point) in evals.iter().zip(&target.curve) {
        assert_eq!((line.value.as_f64(), point.auc), (Some(0.5), Some(0.5)));
    }
    assert_eq!(lines.last().unwrap().meta("status").unwrap().as_str(), Some("aborted"));
    // The benchmark's metric and family are required.
    let loss = trainbench().args(["validate", DLRM_SPEC, "--set", "training.target.metric=loss"]).assert().code(2);
    let stdout = String::from_utf8_lossy(&loss.get_output().stdout).to_string();
    assert!(stdout.contains("quality metric is AUC"), "{stdout}");
    let gpt = trainbench().args(["validate", SPEC, "--set", "mlperf.benchmark=dlrm_dcnv2"]).assert().code(2);
    let stdout = String::from_utf8_lossy(&gpt.get_output().stdout).to_string();
    assert!(stdout.contains("`dlrm_dcnv2` is a click model"), "{stdout}");
}

#[test]
fn a_log_without_submission_fields_or_shared_by_two_runs_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let shared = trainbench()
        .args(["run", SPEC, "--backend", "mock", "--set", "run.repeats=2", "--out"])
        .arg(dir.path())
        .args(["--mllog", "one.txt"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&shared.get_output().stderr).to_string();
    assert!(stderr.contains("would both write their MLPerf log") && stderr.contains("{run_id}"), "{stderr}");
    // `validate` prints its diagnostics on stdout.
    let closed = trainbench().args(["validate", SPEC, "--set", "mlperf.division=closed"]).assert().code(2);
    let stdout = String::from_utf8_lossy(&closed.get_output().stdout).to_string();
    assert!(stdout.contains("closed division requires"), "{stdout}");
    let untargeted = trainbench().args(["validate", SPEC, "--set", "training.target.metric=accuracy"]).assert().code(2);
    let stdout = String::from_utf8_lossy(&untargeted.get_output().stdout).to_string();
    assert!(stdout.contains("log perplexity"), "{stdout}");
    let spec = dir.path().join("plain.toml");
    let text = std::fs::read_to_string(Path::new(ROOT).join(SPEC)).unwrap();
    let plain = text.split("\n[mlperf]\n").next().unwrap().replace("../../datasets", &format!("{ROOT}/datasets"));
    std::fs::write(&spec, plain).unwrap();
    let missing = trainbench()
        .args(["run", "--backend", "mock", "--out"])
        .arg(dir.path().join("out"))
        .arg(&spec)
        .args(["--mllog", "x_{run_id}.txt"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&missing.get_output().stderr).to_string();
    assert!(stderr.contains("[mlperf]"), "{stderr}");
}

/// The Python with `mlperf_logging` (the project's environment: `$VIRTUAL_ENV`, else `$TRAINBENCH_VENV`, else
/// `.venv`), or `None` after a notice (a failure under `CI=true`).
#[cfg(feature = "tch")]
fn checker_python() -> Option<PathBuf> {
    let venv = std::env::var_os("VIRTUAL_ENV")
        .or_else(|| std::env::var_os("TRAINBENCH_VENV"))
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(ROOT).join(".venv"));
    let python = venv.join("bin/python");
    let has = std::process::Command::new(&python)
        .args(["-c", "import mlperf_logging.compliance_checker"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        trainbench_contract::conformance::prerequisite_missing(&format!(
            "{} cannot import mlperf_logging: `source scripts/env.sh` installs it",
            python.display()
        ));
        return None;
    }
    Some(python)
}

/// Train `spec` (named `spec_name`) on tch, require its target reached, run the compliance checker on its log of
/// `benchmark` (it must print SUCCESS), and import the log back: the same time to train. The target's curve.
#[cfg(feature = "tch")]
fn checked_run(spec: &str, spec_name: &str, benchmark: &str) -> Option<Vec<trainbench_contract::target::EvalPoint>> {
    let python = checker_python()?;
    let dir = tempfile::tempdir().unwrap();
    trainbench().args(["run", spec, "--backend", "tch", "--quiet", "--out"]).arg(dir.path()).assert().success();
    let result = result_of(dir.path(), spec_name);
    let target = result.metrics.as_ref().unwrap().time_to_target.clone().unwrap();
    assert!(target.reached, "{spec_name} did not reach its target: {}", target.stopped);
    let results = dir.path().join(format!("{spec_name}/mlperf/results"));
    let log = results.join(format!("{}/{benchmark}/result_0.txt", result.plan.config));
    let lines = read_log(&log);
    let span = time_of(&lines, "run_stop") - time_of(&lines, "run_start");
    assert_eq!(span, (target.time_to_target_s.unwrap() * 1000.0).round() as i64);
    let output = std::process::Command::new(python)
        .args(["-m", "mlperf_logging.compliance_checker", "--usage", "training", "--ruleset", "6.0.0"])
        .arg("--log_output")
        .arg(dir.path().join("compliance_checker.log"))
        .arg(&log)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    eprintln!("compliance checker on {}:\n{text}", log.display());
    assert!(output.status.success() && text.contains("SUCCESS"), "the compliance checker refused the log:\n{text}");
    // Imported back, the log gives the run's time to train.
    trainbench().args(["import", "mlperf"]).arg(&results).arg("--out").arg(dir.path().join("in")).assert().success();
    let text =
        std::fs::read_to_string(dir.path().join(format!("in/mlperf-{benchmark}/{}.r0.json", result.plan.config)));
    let back: RunResult = serde_json::from_str(&text.unwrap()).unwrap();
    let seconds = back.mlperf.unwrap().time_to_train_s().unwrap();
    assert_eq!((seconds * 1000.0).round(), (target.time_to_target_s.unwrap() * 1000.0).round());
    Some(target.curve)
}

#[cfg(feature = "tch")]
#[test]
fn the_compliance_checker_accepts_the_log_of_the_smoke_llama31_8b_run() {
    checked_run(SPEC, "mlperf-llama31-8b-smoke", "llama31_8b");
}

#[cfg(feature = "tch")]
#[test]
fn the_compliance_checker_accepts_the_log_of_the_smoke_dlrm_dcnv2_run() {
    let Some(curve) = checked_run(DLRM_SPEC, "mlperf-dlrm-dcnv2-smoke", "dlrm_dcnv2") else { return };
    // The AUC is what the log states, and it climbed from chance to the target.
    let first = curve.first().and_then(|p| p.auc).unwrap();
    let last = curve.last().and_then(|p| p.auc).unwrap();
    assert!(first < 0.7 && last >= 0.75, "AUC {first} -> {last}");
}
