//! Every result of `trainbench run` records the performance model's prediction for its own configuration: on
//! this machine's calibrated profile when its calibration measured the run's backend and device, on the profile
//! named with `--hardware` otherwise, and without one the reason; the input pipeline's term for local datasets;
//! the world size and exchange of data-parallel runs. The mock backend's simulated calibration stands in for a
//! measured one (its figures are the mock's, honestly named in the profile's method).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

use crate::common::datasets::{self, mlp_spec};

const SPEC: &str = r#"
version = 1
name = "predicted"
[model]
family = "mlp"
inputs = 256
hidden = [512, 512]
classes = 10
[topology]
backend = "mock"
[sweep]
batch_sizes = [8, 64]
[run]
warmup = 1
iterations = 5
"#;

/// `trainbench` in `dir`, with no profile named by the environment.
fn tb(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("trainbench").unwrap();
    c.current_dir(dir).env_remove("TRAINBENCH_HARDWARE");
    c
}

/// Calibrate the mock backend's CPU into `dir/hardware/this-machine.toml`.
fn calibrate_mock(dir: &Path) -> PathBuf {
    let out = dir.join("hardware/this-machine.toml");
    tb(dir).args(["calibrate", "--backend", "mock", "--device", "cpu", "--out"]).arg(&out).assert().success();
    out
}

/// Run `spec` in `dir` with `extra` arguments; the results of `name`, by file name.
fn run(dir: &Path, spec: &str, name: &str, extra: &[&str]) -> Vec<(String, Value)> {
    let path = dir.join("spec.toml");
    std::fs::write(&path, spec).unwrap();
    let out = dir.join("out");
    tb(dir).args(["run", "--quiet", "--overwrite", "--out"]).arg(&out).args(extra).arg(&path).assert().success();
    let mut results: Vec<(String, Value)> = std::fs::read_dir(out.join(name))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n != "index.json"))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), read(&p)))
        .collect();
    results.sort_by(|a, b| a.0.cmp(&b.0));
    results
}

fn read(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn a_run_records_the_prediction_of_its_configuration_on_this_machines_calibrated_profile() {
    let dir = tempfile::tempdir().unwrap();
    let profile = calibrate_mock(dir.path());
    let results = run(dir.path(), SPEC, "predicted", &[]);
    assert_eq!(results.len(), 2);
    // What `predict` says for each configuration on the same profile.
    std::fs::write(dir.path().join("spec.toml"), SPEC).unwrap();
    let o = tb(dir.path()).args(["predict", "spec.toml", "--format", "json"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let predicted: Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut steps = Vec::new();
    for (file, r) in &results {
        let p = &r["prediction"];
        assert_eq!(p["status"], "predicted", "{file}: {p}");
        assert_eq!(p["profile"]["chosen_by"], "this-machine");
        assert_eq!(p["profile"]["calibrated"], true);
        assert_eq!(p["profile"]["calibrated_on"], "mock cpu");
        assert_eq!(p["profile"]["origin"], profile.display().to_string());
        let config = r["plan"]["config"].as_str().unwrap();
        let expected = predicted["predictions"].as_array().unwrap().iter().find(|e| e["config"] == config).unwrap();
        assert_eq!(f(&p["step_time_s"]), f(&expected["step_time_s"]), "{config}");
        assert_eq!(p["per_device_batch"], r["plan"]["batch_size"]);
        let batch = f(&r["plan"]["batch_size"]);
        assert!((f(&p["samples_per_s"]) - batch / f(&p["step_time_s"])).abs() <= 1e-9 * f(&p["samples_per_s"]));
        let s = &p["shares"];
        assert!((f(&s["data"]) + f(&s["compute"]) + f(&s["comm"]) - 1.0).abs() < 1e-9, "{s}");
        assert_eq!(p["world_size"], 1);
        assert!(p.get("input").is_none(), "synthetic data has no input pipeline term");
        steps.push(f(&p["step_time_s"]));
    }
    // The files sort b64 before b8.
    assert!(steps[0] > steps[1], "batch 64 is predicted slower than batch 8: {steps:?}");
}

#[test]
fn a_profile_calibrated_on_another_backend_is_not_used_and_the_result_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let profile = calibrate_mock(dir.path());
    let text = std::fs::read_to_string(&profile).unwrap();
    std::fs::write(&profile, text.replace("backend = \"mock\"", "backend = \"tch\"")).unwrap();
    for (_, r) in run(dir.path(), SPEC, "predicted", &[]) {
        let p = &r["prediction"];
        assert_eq!(p["status"], "absent");
        let reason = p["reason"].as_str().unwrap();
        assert!(reason.contains("was calibrated on tch cpu, this run is on mock cpu"), "{reason}");
        assert!(reason.contains("trainbench calibrate --backend mock --device cpu"), "{reason}");
    }
}

#[test]
fn without_a_profile_the_result_says_how_to_get_one() {
    let dir = tempfile::tempdir().unwrap();
    for (_, r) in run(dir.path(), SPEC, "predicted", &[]) {
        assert_eq!(r["prediction"]["status"], "absent");
        assert!(r["prediction"]["reason"].as_str().unwrap().contains("trainbench calibrate --out"));
    }
}

#[test]
fn a_named_datasheet_profile_is_used_and_recorded_as_datasheet_figures() {
    let dir = tempfile::tempdir().unwrap();
    calibrate_mock(dir.path());
    for (_, r) in run(dir.path(), SPEC, "predicted", &["--hardware", "v100"]) {
        let p = &r["prediction"];
        assert_eq!(p["status"], "predicted");
        assert_eq!(p["profile"]["name"], "v100");
        assert_eq!(p["profile"]["origin"], "shipped:v100");
        assert_eq!(p["profile"]["chosen_by"], "--hardware");
        assert_eq!(p["profile"]["calibrated"], false);
        assert!(p["profile"].get("calibrated_at").is_none());
    }
    // A profile that does not load stops `run` before anything runs.
    let o =
        tb(dir.path()).args(["run", "--out", "out2", "--hardware", "no-such-profile", "spec.toml"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such-profile"));
    assert!(!dir.path().join("out2").exists());
}

#[test]
fn a_data_parallel_run_is_predicted_with_its_world_size_and_exchange() {
    let dir = tempfile::tempdir().unwrap();
    let spec = SPEC.replace(
        "[sweep]\nbatch_sizes = [8, 64]",
        "[sweep]\nbatch_sizes = [64]\ntopologies = [{ devices_per_node = 2, strategy = \"all-reduce\", interconnect = \"nvlink\" }]",
    );
    let results = run(dir.path(), &spec, "predicted", &["--hardware", "v100"]);
    assert_eq!(results.len(), 1);
    let r = &results[0].1;
    let p = &r["prediction"];
    assert_eq!(p["status"], "predicted", "{p}");
    assert_eq!((p["world_size"].as_u64(), p["per_device_batch"].as_u64()), (Some(2), Some(32)));
    // Ring all-reduce of W = 2 sends 2 (W - 1) / W = 1 x the fp32 gradients per worker.
    let params = f(&r["analysis"]["parameters"]);
    assert!((f(&p["comm_bytes_per_worker"]) - 4.0 * params).abs() < 1e-6, "{p}");
    assert!(f(&p["phases"]["comm_s"]) > 0.0 && f(&p["shares"]["comm"]) > 0.0);

    // The mock's calibrated profile measured no link between devices: no prediction, and the reason names it.
    calibrate_mock(dir.path());
    let results = run(dir.path(), &spec, "predicted", &[]);
    let p = &results[0].1["prediction"];
    assert_eq!(p["status"], "absent");
    assert!(p["reason"].as_str().unwrap().contains("has no link for `topology.interconnect = \"nvlink\"`"), "{p}");
}

#[test]
fn a_local_dataset_adds_the_input_pipelines_wait() {
    let dir = tempfile::tempdir().unwrap();
    datasets::npy_f32(&dir.path().join("d"), 64, 64, 10);
    calibrate_mock(dir.path());
    // Without reading threads the step waits for the whole batch; with them only for what exceeds the step.
    for (extra, prefetched) in [("", false), ("workers = 2", true)] {
        let results = run(dir.path(), &mlp_spec(64, 10, "d", "npy", extra), "local-data", &[]);
        let r = &results[0].1;
        let p = &r["prediction"];
        assert_eq!(p["status"], "predicted", "{p}");
        let i = &p["input"];
        let rate = f(&r["data"]["loader"]["samples_per_s"]);
        assert_eq!(f(&i["loader_samples_per_s"]), rate);
        assert!((f(&i["loader_batch_s"]) - 8.0 / rate).abs() <= 1e-12 * f(&i["loader_batch_s"]).max(1.0));
        assert_eq!(i["prefetched"], prefetched);
        let wait = f(&i["input_wait_s"]);
        if prefetched {
            let rest = f(&p["step_time_s"]) - wait;
            assert!((wait - (f(&i["loader_batch_s"]) - rest).max(0.0)).abs() < 1e-12, "{p}");
        } else {
            assert_eq!(wait, f(&i["loader_batch_s"]));
        }
        assert!(f(&p["phases"]["data_s"]) >= wait);
    }
}

#[test]
fn report_puts_predicted_against_measured_with_the_errors_and_shares() {
    let dir = tempfile::tempdir().unwrap();
    calibrate_mock(dir.path());
    let results = run(dir.path(), SPEC, "predicted", &[]);
    let report = dir.path().join("report");
    tb(dir.path()).args(["report", "--out"]).arg(&report).arg(dir.path().join("out")).assert().success();
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    let section = md.split("## Predicted vs measured").nth(1).expect("a predicted-vs-measured section");
    let section = section.split("\n## ").next().unwrap();
    assert!(section.contains("![Predicted vs measured step time: predicted](predicted-predicted.svg)"), "{section}");
    assert!(section.contains("(predicted-shares-predicted.svg)"), "{section}");
    // One table row per configuration, its error computed from the result's own figures.
    for (_, r) in &results {
        let config = r["plan"]["config"].as_str().unwrap();
        let line =
            section.lines().find(|l| l.starts_with(&format!("| {config} |"))).unwrap_or_else(|| panic!("{section}"));
        let measured = f(&r["metrics"]["step_time"]["median_s"]);
        let predicted = f(&r["prediction"]["step_time_s"]);
        let error = format!("{:+.1}%", (predicted - measured) / measured * 100.0);
        assert!(line.contains(&error) && line.contains("this-machine (calibrated)"), "{line} lacks {error}");
    }
    assert!(section.contains("Over 2 configuration(s): median |error|"), "{section}");
    for id in ["predicted-predicted", "predicted-shares-predicted"] {
        let svg = std::fs::read_to_string(report.join(format!("{id}.svg"))).unwrap();
        assert!(svg.contains("<title>"), "{id}");
    }
    // runs.csv carries each run's predicted step and profile.
    let csv = std::fs::read_to_string(report.join("runs.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let (step, profile) = (
        header.iter().position(|h| *h == "predicted_step_s").unwrap(),
        header.iter().position(|h| *h == "prediction_profile").unwrap(),
    );
    for line in lines {
        let cells = crate::report_files::csv_fields(line);
        let (_, r) = results.iter().find(|(_, r)| cells[1] == r["run_id"].as_str().unwrap()).unwrap();
        assert_eq!(cells[step].parse::<f64>().unwrap(), f(&r["prediction"]["step_time_s"]));
        assert_eq!(cells[profile], "this-machine");
    }
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(html.contains("<section id=\"predicted\">") && html.contains("<table id=\"predicted-table\">"));

    // Without a profile the section still says why there is no prediction.
    std::fs::remove_file(dir.path().join("hardware/this-machine.toml")).unwrap();
    run(dir.path(), SPEC, "predicted", &[]);
    tb(dir.path()).args(["report", "--out"]).arg(&report).arg(dir.path().join("out")).assert().success();
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    let section = md.split("## Predicted vs measured").nth(1).expect("the section, with the reasons");
    assert!(section.contains("No prediction for predicted.b8.fp32.1x1: no hardware profile"), "{section}");
    assert!(!section.contains("predicted-predicted.svg"), "no scatter without a prediction: {section}");
}
