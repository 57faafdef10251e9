//! CLI snapshot tests of `trainbench run --backend mock`: the summary table and the shape of a result file
//! (environment redacted, floats rounded to 4 significant digits so the snapshot survives last-bit noise); the
//! reasons of runs that did not complete under the table; progress lines when stderr is not a terminal; what
//! `--quiet` leaves out.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

const SPEC: &str = r#"
version = 1
name = "cli-mock"
[model]
family = "mlp"
inputs = 32
hidden = [64]
classes = 10
[topology]
backend = "mock"
[sweep]
batch_sizes = [8, 32]
[run]
warmup = 3
iterations = 20
"#;

fn round_floats(v: &mut Value) {
    match v {
        Value::Number(n) if n.is_f64() => {
            let x = n.as_f64().unwrap();
            let rounded = if x == 0.0 { 0.0 } else { format!("{x:.3e}").parse::<f64>().unwrap() };
            *v = serde_json::json!(rounded);
        }
        Value::Array(items) => items.iter_mut().for_each(round_floats),
        Value::Object(map) => map.values_mut().for_each(round_floats),
        _ => {}
    }
}

fn write_spec(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("spec.toml");
    std::fs::write(&path, SPEC).unwrap();
    path
}

#[test]
fn run_mock_prints_a_summary_and_writes_results() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path());
    let out = dir.path().join("out");
    // In a folder without `hardware/this-machine.toml` and without `$TRAINBENCH_HARDWARE`: no profile, so the
    // result records why it has no prediction (tests/it/run_prediction.rs covers the profiles).
    let assert = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir.path())
        .env_remove("TRAINBENCH_HARDWARE")
        .args(["run", "--backend", "mock", "--out"])
        .arg(&out)
        .arg(&spec)
        .assert()
        .success();
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    crate::common::golden_settings("run").bind(|| insta::assert_snapshot!("run_mock_table", stdout));

    let mut result: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("cli-mock/cli-mock.b8.fp32.1x1.r0.json")).unwrap())
            .unwrap();
    let n = result["metrics"]["step_times_s"].as_array().unwrap().len();
    result["metrics"]["step_times_s"] = Value::String(format!("[{n} step times]"));
    round_floats(&mut result);
    crate::common::golden_settings("run").bind(|| {
        insta::assert_json_snapshot!("run_mock_result", result, {
            ".environment.trainbench_version" => "[VERSION]",
            ".environment.git_commit" => "[COMMIT]",
            ".environment.spec_sha256" => "[SHA256]",
            ".environment.spec_canonical" => "[CANONICAL SPEC]",
            ".environment.gpus" => "[NVML]",
            ".environment.cpu" => "[CPU]",
            ".environment.os" => "[OS]",
            ".environment.hostname" => "[HOST]",
            ".environment.process.pid" => "[PID]",
            ".environment.env_vars" => "[ENV]",
            ".environment.started_at" => "[TIME]",
            ".environment.finished_at" => "[TIME]",
            ".metrics.cpu" => "[CPU SAMPLES]",
        });
    });
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("cli-mock/index.json")).unwrap()).unwrap();
    assert_eq!(index["runs"].as_array().unwrap().len(), 2);
}

#[test]
fn run_json_format_lists_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path());
    let assert = Command::cargo_bin("trainbench")
        .unwrap()
        .args(["run", "--quiet", "--format", "json", "--set", "sweep.batch_sizes=[4]", "--out"])
        .arg(dir.path().join("out"))
        .arg(&spec)
        .assert()
        .success();
    let rows: Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["run_id"], "cli-mock.b4.fp32.1x1.r0");
    assert_eq!(rows[0]["outcome"]["status"], "completed");
    assert!(rows[0]["samples_per_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn run_with_a_backend_not_built_fails_with_a_hint() {
    // In a build with tch (every CI build) a test hook stands in for a build without it: the runner then runs
    // the not-built stub, as such a build does; in a build without tch the real path runs.
    let built = trainbench::backend_registry::built(trainbench_contract::BackendKind::Tch);
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path());
    // In-process (one repeat) and in workers (repeats in processes of their own).
    for repeats in ["run.repeats=1", "run.repeats=2"] {
        let out = dir.path().join(format!("out-{repeats}"));
        let mut cmd = Command::cargo_bin("trainbench").unwrap();
        cmd.args(["run", "--quiet", "--backend", "tch", "--set", repeats, "--out"]).arg(&out).arg(&spec);
        if built {
            cmd.args(["--test-hooks", r#"{"backend_not_built": "tch"}"#]);
        }
        let assert = cmd.assert().code(2);
        let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
        assert!(stderr.contains("rebuild with `--features tch`"), "{repeats}: {stderr}");
        assert!(!out.join("cli-mock").exists(), "{repeats}: no run started");
    }
}

#[test]
fn bad_set_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path());
    Command::cargo_bin("trainbench").unwrap().args(["run", "--set", "nonsense"]).arg(&spec).assert().code(2);
}

#[test]
fn quiet_prints_nothing_when_all_goes_well() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path());
    let out = dir.path().join("out");
    // A time budget next to written iterations is a spec warning: quiet leaves it out too.
    let assert = Command::cargo_bin("trainbench")
        .unwrap()
        .args(["run", "--quiet", "--set", "run.time_budget_s=0.05", "--out"])
        .arg(&out)
        .arg(&spec)
        .assert()
        .success();
    let o = assert.get_output();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "");
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
    assert!(out.join("cli-mock/cli-mock.b8.fp32.1x1.r0.json").is_file());
    // Without --quiet the warning and the table are there.
    let assert = Command::cargo_bin("trainbench")
        .unwrap()
        .args(["run", "--set", "run.time_budget_s=0.05", "--out"])
        .arg(dir.path().join("out2"))
        .arg(&spec)
        .assert()
        .success();
    let o = assert.get_output();
    assert!(String::from_utf8_lossy(&o.stderr).contains("is ignored when `run.time_budget_s` is set"), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("samples/s"), "{o:?}");
}

#[test]
fn quiet_still_reports_failed_runs_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path());
    // The worker of repeat 1 dies: its runs fail, with a reason on stderr and exit 1.
    let assert = Command::cargo_bin("trainbench")
        .unwrap()
        .args(["run", "--quiet", "--set", "run.repeats=2", "--test-hooks", r#"{"mock_abort_repeat": 1}"#, "--out"])
        .arg(dir.path().join("out"))
        .arg(&spec)
        .assert()
        .code(1);
    let o = assert.get_output();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("cli-mock.b8.fp32.1x1.r1: failed: the worker process"), "{stderr}");
    assert!(stderr.contains("cli-mock.b32.fp32.1x1.r1: failed: not run"), "{stderr}");
    assert!(!stderr.contains(".r0"), "{stderr}");
    // JSON was asked for explicitly: it is printed even when quiet.
    let assert = Command::cargo_bin("trainbench")
        .unwrap()
        .args(["run", "--quiet", "--format", "json", "--out"])
        .arg(dir.path().join("out2"))
        .arg(&spec)
        .assert()
        .success();
    let rows: Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2);
}

#[test]
fn the_reasons_of_runs_that_did_not_complete_are_printed_under_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path());
    // Repeat 0: batch 8 completes, batch 50M runs out of the mock device's 16 GiB. Repeat 1 (a worker of its own):
    // batch 8 fails (test hook), batch 50M is skipped after repeat 0's out-of-memory.
    let args = ["--set", "sweep.batch_sizes=[8, 50000000]", "--set", "run.repeats=2"];
    let hooks = ["--test-hooks", r#"{"mock_fail_repeat": 1}"#];
    let assert = Command::cargo_bin("trainbench")
        .unwrap()
        .env_remove("TRAINBENCH_PROGRESS_INTERVAL_S")
        .args(["run", "--out"])
        .arg(dir.path().join("out"))
        .arg(&spec)
        .args(args)
        .args(hooks)
        .assert()
        .code(1);
    let o = assert.get_output();
    let tmp = dir.path().display().to_string();
    let text = format!(
        "--- stdout ---\n{}--- stderr ---\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr).replace(&tmp, "[TMP]")
    );
    crate::common::golden_settings("run").bind(|| insta::assert_snapshot!("run_failure_reasons", text));

    // Quiet: only the failed run's line, on stderr (out of memory and skipped are outcomes of a sweep, not errors).
    let assert = Command::cargo_bin("trainbench")
        .unwrap()
        .args(["run", "--quiet", "--out"])
        .arg(dir.path().join("out-quiet"))
        .arg(&spec)
        .args(args)
        .args(hooks)
        .assert()
        .code(1);
    let o = assert.get_output();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "cli-mock.b8.fp32.1x1.r1: failed: mock backend: failing in repeat 1 (test hook)\n"
    );
}

/// Whether `line` reads `progress [i/N] <run id>: <warm-up|measured> a/b, median step <x> ms, ETA <y> s`.
fn is_progress_line(line: &str, run_id: &str) -> bool {
    let Some(rest) = line.strip_prefix("progress [") else { return false };
    let Some((index, rest)) = rest.split_once("] ") else { return false };
    let Some(rest) = rest.strip_prefix(run_id).and_then(|r| r.strip_prefix(": ")) else { return false };
    let fields: Vec<&str> = rest.split(", ").collect();
    let fraction =
        |s: &str| s.split_once('/').is_some_and(|(a, b)| a.parse::<u64>().is_ok() && b.parse::<u64>().is_ok());
    let number_then = |s: Option<&str>, unit: &str| {
        s.and_then(|s| s.strip_suffix(unit)).is_some_and(|n| n.parse::<f64>().is_ok_and(|x| x >= 0.0))
    };
    fraction(index)
        && fields.len() == 3
        && fields[0].split_once(' ').is_some_and(|(phase, f)| ["warm-up", "measured"].contains(&phase) && fraction(f))
        && number_then(fields[1].strip_prefix("median step "), " ms")
        && number_then(fields[2].strip_prefix("ETA "), " s")
}

#[test]
fn progress_lines_are_written_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path());
    // The mock backend simulates its step times without sleeping, so a run lasts milliseconds: an interval of
    // 0 s writes a line after every iteration, which makes the lines' presence independent of the machine's speed.
    let run = |out: &str, extra: &[&str]| {
        Command::cargo_bin("trainbench")
            .unwrap()
            .env("TRAINBENCH_PROGRESS_INTERVAL_S", "0")
            .args(["run", "--set", "sweep.batch_sizes=[8]", "--out"])
            .arg(dir.path().join(out))
            .arg(&spec)
            .args(extra)
            .output()
            .unwrap()
    };
    // Two repeats, each in a worker process whose stderr is the parent's; then one repeat in this process.
    for (out, repeats) in [("workers", 2u32), ("in-process", 1)] {
        let o = run(out, &["--set", &format!("run.repeats={repeats}")]);
        assert_eq!(o.status.code(), Some(0), "{o:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        for r in 0..repeats {
            let id = format!("cli-mock.b8.fp32.1x1.r{r}");
            let mine: Vec<&str> =
                stderr.lines().filter(|l| l.starts_with(&format!("progress [{}/{repeats}] {id}:", r + 1))).collect();
            assert!(mine.iter().all(|l| is_progress_line(l, &id)), "{stderr}");
            assert!(mine.iter().any(|l| l.contains(": warm-up 1/3, ")), "{stderr}");
            assert!(mine.iter().any(|l| l.contains(": measured 20/20, ")), "{stderr}");
        }
        assert!(String::from_utf8_lossy(&o.stdout).contains("samples/s"), "{o:?}");
    }
    // --quiet writes none; a bad interval is refused before anything runs.
    let o = run("quiet", &["--quiet"]);
    assert_eq!((o.status.code(), String::from_utf8_lossy(&o.stderr).as_ref()), (Some(0), ""), "{o:?}");
    let o = Command::cargo_bin("trainbench")
        .unwrap()
        .env("TRAINBENCH_PROGRESS_INTERVAL_S", "soon")
        .args(["run", "--out"])
        .arg(dir.path().join("bad"))
        .arg(&spec)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("TRAINBENCH_PROGRESS_INTERVAL_S must be a number"), "{o:?}");
    assert!(!dir.path().join("bad").exists());
}

/// `trainbench run --quiet` of the spec into `out` with extra arguments.
fn run_into(spec: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    Command::cargo_bin("trainbench")
        .unwrap()
        .args(["run", "--quiet", "--set", "run.repeats=2", "--out"])
        .arg(out)
        .arg(spec)
        .args(extra)
        .output()
        .unwrap()
}

/// Every file under `dir` with its contents.
fn snapshot_folder(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_second_run_into_the_same_folder_is_refused_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path());
    let out = dir.path().join("out");
    assert_eq!(run_into(&spec, &out, &[]).status.code(), Some(0));
    let before = snapshot_folder(&out.join("cli-mock"));
    assert_eq!(before.len(), 5, "4 results and the index");

    let o = run_into(&spec, &out, &[]);
    assert_eq!(o.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&o.stderr);
    let expected = format!("error: {} already holds 4 result files of these runs", out.display());
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert!(stderr.contains("`--overwrite`") && stderr.contains("another `--out`"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(snapshot_folder(&out.join("cli-mock")), before, "nothing may change");

    // Runs that are not there yet are no conflict, but one that is, is.
    assert_eq!(run_into(&spec, &out, &["--set", "sweep.batch_sizes=[4]"]).status.code(), Some(0));
    let o = run_into(&spec, &out, &["--set", "sweep.batch_sizes=[4,8]"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("already holds 4 result files"), "{o:?}");
}

#[test]
fn overwrite_replaces_the_earlier_results() {
    let dir = tempfile::tempdir().unwrap();
    let spec = write_spec(dir.path());
    let out = dir.path().join("out");
    assert_eq!(run_into(&spec, &out, &[]).status.code(), Some(0));
    let file = out.join("cli-mock/cli-mock.b8.fp32.1x1.r1.json");
    let first: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();

    let o = run_into(&spec, &out, &["--overwrite"]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let second: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    // Each repeat ran in a worker process of its own: the replaced result names the new one.
    assert_ne!(first["environment"]["process"]["pid"], second["environment"]["process"]["pid"]);
    let index: Value = serde_json::from_slice(&std::fs::read(out.join("cli-mock/index.json")).unwrap()).unwrap();
    assert_eq!(index["runs"].as_array().unwrap().len(), 4);
}
