//! `trainbench predict` and hardware profiles on the command line: the JSON keys scripts read, the PAI what-if
//! table on PAI's assumed machine (snapshot in golden/predict/: the model's arithmetic on datasheet figures is
//! deterministic), and located errors for a broken profile.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;

fn tb() -> Command {
    let mut c = Command::cargo_bin("trainbench").unwrap();
    c.current_dir(env!("CARGO_MANIFEST_DIR")).env_remove("TRAINBENCH_HARDWARE");
    c
}

#[test]
fn json_has_step_time_throughput_and_shares() {
    let o = tb()
        .args(["predict", "specs/pai/ps_vs_allreduce.toml", "--hardware", "pai-assumed", "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = v["predictions"].as_array().unwrap();
    assert_eq!(p.len(), 2, "one per topology of the sweep");
    for e in p {
        let step = e["step_time_s"].as_f64().unwrap();
        assert!(step > 0.0);
        assert!((e["samples_per_s"].as_f64().unwrap() - 256.0 / step).abs() < 1e-9 * 256.0 / step);
        let s = &e["shares"];
        let sum = s["data"].as_f64().unwrap() + s["compute"].as_f64().unwrap() + s["comm"].as_f64().unwrap();
        assert!((sum - 1.0).abs() < 1e-9, "{s}");
    }
    // PS/worker over 25 Gbit Ethernet spends more of its step communicating than all-reduce over NVLink.
    assert!(p[0]["shares"]["comm"].as_f64().unwrap() > p[1]["shares"]["comm"].as_f64().unwrap());
}

#[test]
fn what_if_table_on_pai_assumed_hardware() {
    let o = tb()
        .args(["predict", "specs/pai/ps_worker_ethernet.toml", "--hardware", "pai-assumed", "--what-if"])
        .args(["--set", "sweep.batch_sizes=[32]"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    crate::common::golden_settings("predict").bind(|| insta::assert_snapshot!("pai_ps_worker_what_if", text));
}

#[test]
fn per_layer_table_marks_compute_and_memory_bound_layers() {
    let o = tb().args(["predict", "specs/smoke/mlp.toml", "--hardware", "v100", "--per-layer"]).output().unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("fc0") && text.contains("memory"), "{text}");
}

#[test]
fn without_a_profile_predict_says_how_to_get_one() {
    let dir = tempfile::tempdir().unwrap();
    let spec = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/smoke/mlp.toml");
    let o = Command::cargo_bin("trainbench")
        .unwrap()
        .current_dir(dir.path())
        .env_remove("TRAINBENCH_HARDWARE")
        .arg("predict")
        .arg(&spec)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("trainbench calibrate --out hardware/this-machine.toml"));
}

#[test]
fn validate_checks_hardware_profiles_with_located_errors() {
    let o = tb().args(["validate", "hardware/"]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("hardware profiles: all valid"), "the summary names what it checked: {out}");
    let o = tb().args(["validate", "hardware/v100.toml", "specs/smoke/mlp.toml"]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("checked 2 files (1 spec, 1 hardware profile): all valid"), "{out}");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/hardware/v100.toml")).unwrap();
    std::fs::write(&bad, text.replace("bandwidth_gbs = 150.0", "bandwith_gbs = 150.0")).unwrap();
    let o = tb().arg("validate").arg(&bad).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("bandwith_gbs") && out.contains("bandwidth_gbs") && out.contains("bad.toml:"), "{out}");
}

#[test]
fn calibrate_writes_a_profile_predict_reads_and_never_overwrites_silently() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hw.toml");
    let o = tb().args(["calibrate", "--backend", "mock", "--max-gemm", "128", "--out"]).arg(&out).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = trainbench::hardware::ProfileValidator::new().unwrap();
    let f = v.check_file(&out, "hw.toml").unwrap();
    let cal = f.calibration.as_ref().unwrap();
    assert!(cal.method.contains("mock") && cal.backend == "mock");
    // The mock's kernels run at its nominal rate: the best rate reached is that rate.
    let rate = trainbench_contract::mock::MockConfig::default().flop_rate;
    assert!((f.device.peak_tflops.fp32 * 1e12 - rate).abs() < 1e-6 * rate);
    assert_eq!(cal.gemm.iter().filter(|p| p.precision == trainbench_graph::Precision::Fp32).count(), 3);
    // Bandwidth by working set: four cache-sized adds and the memory-sized one, in bytes moved per call; the
    // mock's bandwidth does not depend on the size.
    let bytes: Vec<f64> = cal.bandwidth.iter().map(|p| p.bytes).collect();
    assert_eq!(bytes, [48.0 * 1024.0, 384.0 * 1024.0, 3.0 * 1048576.0, 24.0 * 1048576.0, 96.0 * 1048576.0]);
    assert!(cal.bandwidth.iter().all(|p| (p.bytes / p.seconds / 1e9 - cal.triad_gbs).abs() < 1e-9 * cal.triad_gbs));
    // A second calibration does not replace the first without --overwrite.
    let again = tb().args(["calibrate", "--backend", "mock", "--out"]).arg(&out).output().unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--overwrite"));
    let o = tb()
        .args(["predict", "specs/smoke/mlp.toml", "--format", "json"])
        .env("TRAINBENCH_HARDWARE", &out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["predictions"][0]["calibrated"], true);
    assert_eq!(j["predictions"][0]["hardware"], "this-machine");
}

#[test]
fn calibrate_rounds_keep_every_figure_as_the_median_of_complete_calibrations() {
    let dir = tempfile::tempdir().unwrap();
    let (one, three) = (dir.path().join("one.toml"), dir.path().join("three.toml"));
    for (out, rounds) in [(&one, "1"), (&three, "3")] {
        let o = tb()
            .args(["calibrate", "--backend", "mock", "--max-gemm", "128", "--rounds", rounds, "--out"])
            .arg(out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let v = trainbench::hardware::ProfileValidator::new().unwrap();
    let (a, b) = (v.check_file(&one, "one.toml").unwrap(), v.check_file(&three, "three.toml").unwrap());
    let (ca, cb) = (a.calibration.as_ref().unwrap(), b.calibration.as_ref().unwrap());
    assert!(cb.method.contains("the median over 3 complete calibrations") && !ca.method.contains("median over 3"));
    // The same points in the same order, each the median of three.
    assert_eq!(ca.gemm.len(), cb.gemm.len());
    assert_eq!(ca.elementwise.len(), cb.elementwise.len());
    assert_eq!(
        ca.node.iter().map(|p| &p.class).collect::<Vec<_>>(),
        cb.node.iter().map(|p| &p.class).collect::<Vec<_>>()
    );
    assert_eq!(a.device.peak_tflops, b.device.peak_tflops, "the mock's rate does not vary");
}

#[test]
fn terms_are_shown_per_layer_and_switched_off_by_name() {
    let cal = "tests/fixtures/hardware/tch-cpu.toml";
    let json = |extra: &[&str]| {
        let o =
            tb().args(["predict", "specs/smoke/mlp.toml", "--hardware", cal, "--format", "json"]).args(extra).output();
        let o = o.unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let full = json(&["--per-layer"]);
    let fc = &full["predictions"][0]["layers"][0];
    assert!(fc["forward"]["terms"]["per-op-overhead"].as_f64().unwrap() > 0.0, "{fc}");
    assert!(full["predictions"][0].get("terms_off").is_none());
    let without = json(&["--without-term", "first-node-cold-start", "--without-term", "step-fixed"]);
    let p = &without["predictions"][0];
    assert_eq!(p["terms_off"], serde_json::json!(["step-fixed", "first-node-cold-start"]));
    assert!(p["step_time_s"].as_f64().unwrap() < full["predictions"][0]["step_time_s"].as_f64().unwrap());
    // The text table gives each layer's terms; an unknown term is refused with the known ones.
    let o = tb().args(["predict", "specs/smoke/mlp.toml", "--hardware", cal, "--per-layer"]).output().unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("      forward: ") && text.contains("per-op-overhead"), "{text}");
    let o =
        tb().args(["predict", "specs/smoke/mlp.toml", "--hardware", cal, "--without-term", "cold"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unknown term `cold`") && err.contains("first-node-cold-start"), "{err}");
}

#[test]
fn every_prediction_carries_an_80_percent_interval_around_its_step() {
    for hardware in ["h100", "tests/fixtures/hardware/tch-cpu.toml"] {
        let o = tb()
            .args(["predict", "specs/smoke/transformer_tiny.toml", "--format", "json", "--hardware", hardware])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        for e in v["predictions"].as_array().unwrap() {
            let step = e["step_time_s"].as_f64().unwrap();
            let i = &e["interval"];
            let (low, high) = (i["low_s"].as_f64().unwrap(), i["high_s"].as_f64().unwrap());
            assert_eq!(i["level"].as_f64(), Some(0.8));
            assert!(low < step && step < high, "{hardware}: {low} {step} {high}");
            assert!((low * high - step * step).abs() < 1e-9 * step * step, "symmetric in log");
        }
    }
    let text = tb().args(["predict", "specs/smoke/mlp.toml", "--hardware", "h100"]).output().unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("80% interval"));
}
