//! `trainbench calibrate` on a loaded machine, with synthetic load readings (`--load-reading`), so that no test
//! passes or fails by the host it runs on: a loaded reading is refused (exit 3, the figures and their limits
//! named, nothing written) unless `--allow-loaded`, which stores the profile marked as loaded; `predict` shows
//! the mark. A quiet reading is stored marked quiet.
#![allow(clippy::unwrap_used)]

use assert_cmd::Command;

fn tb() -> Command {
    let mut c = Command::cargo_bin("trainbench").unwrap();
    c.current_dir(env!("CARGO_MANIFEST_DIR")).env_remove("TRAINBENCH_HARDWARE");
    c
}

const LOADED: &str = r#"{"cores": 2, "others_per_core": 0.9, "steal_share": 0.0, "probe_cv": 0.4, "probes": 35}"#;
const QUIET: &str = r#"{"cores": 2, "others_per_core": 0.0, "steal_share": 0.0, "probe_cv": 0.02, "probes": 35}"#;

fn calibrate(dir: &std::path::Path, reading: &str, allow: bool) -> (std::process::Output, std::path::PathBuf) {
    let r = dir.join("reading.json");
    std::fs::write(&r, reading).unwrap();
    let out = dir.join("hw.toml");
    let mut c = tb();
    c.args(["calibrate", "--backend", "mock", "--max-gemm", "128", "--overwrite", "--load-reading"]).arg(&r);
    if allow {
        c.arg("--allow-loaded");
    }
    (c.arg("--out").arg(&out).output().unwrap(), out)
}

#[test]
fn a_loaded_machine_is_refused_with_its_figures_unless_allowed_and_then_marked() {
    let dir = tempfile::tempdir().unwrap();
    let (o, out) = calibrate(dir.path(), LOADED, false);
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    for part in [
        "loaded before calibrating",
        "others' load per core 0.900 > 0.250",
        "probe spread 0.400 > 0.150",
        "--allow-loaded",
    ] {
        assert!(err.contains(part), "{part} missing: {err}");
    }
    assert!(!out.exists(), "nothing is written for a refused calibration");

    let (o, out) = calibrate(dir.path(), LOADED, true);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = trainbench::hardware::ProfileValidator::new().unwrap();
    let f = v.check_file(&out, "hw.toml").unwrap();
    let mark = f.calibration.as_ref().unwrap().load.as_ref().unwrap();
    assert!(mark.loaded && mark.allowed_loaded && mark.exceeded.len() == 2, "{mark:?}");
    let p = tb().args(["predict", "specs/smoke/mlp.toml", "--hardware"]).arg(&out).output().unwrap();
    assert!(p.status.success());
    assert!(String::from_utf8_lossy(&p.stdout).contains("WARNING: calibrated on a loaded machine"));
    let j =
        tb().args(["predict", "specs/smoke/mlp.toml", "--format", "json", "--hardware"]).arg(&out).output().unwrap();
    let j: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    assert!(j["predictions"][0]["loaded_calibration"].as_str().unwrap().contains("probe spread"));
}

#[test]
fn a_quiet_machine_is_stored_marked_quiet_and_predict_says_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (o, out) = calibrate(dir.path(), QUIET, false);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = trainbench::hardware::ProfileValidator::new().unwrap();
    let f = v.check_file(&out, "hw.toml").unwrap();
    let mark = f.calibration.as_ref().unwrap().load.as_ref().unwrap();
    assert!(!mark.loaded && mark.exceeded.is_empty());
    let j =
        tb().args(["predict", "specs/smoke/mlp.toml", "--format", "json", "--hardware"]).arg(&out).output().unwrap();
    let j: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    assert!(j["predictions"][0].get("loaded_calibration").is_none());
}

/// The interval's relative half-width of `predict` on profile `hw`.
fn half_width(hw: &std::path::Path) -> f64 {
    let j = tb().args(["predict", "specs/smoke/mlp.toml", "--format", "json", "--hardware"]).arg(hw).output().unwrap();
    assert!(j.status.success(), "{}", String::from_utf8_lossy(&j.stderr));
    let j: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    j["predictions"][0]["interval"]["log_half_width"].as_f64().unwrap()
}

#[test]
fn a_machine_whose_speed_drifts_widens_every_interval_by_its_drift() {
    let dir = tempfile::tempdir().unwrap();
    let (o, steady) = calibrate(dir.path(), QUIET, false);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let steady_w = half_width(&steady);
    let drifting_dir = tempfile::tempdir().unwrap();
    let drifting = r#"{"cores": 2, "others_per_core": 0.0, "steal_share": 0.0, "probe_cv": 0.02, "probe_drift": 0.3, "probes": 35}"#;
    let (o, hw) = calibrate(drifting_dir.path(), drifting, false);
    assert!(o.status.success(), "the drift is judged against no limit: {}", String::from_utf8_lossy(&o.stderr));
    let v = trainbench::hardware::ProfileValidator::new().unwrap();
    let f = v.check_file(&hw, "hw.toml").unwrap();
    assert_eq!(f.calibration.as_ref().unwrap().load.as_ref().unwrap().probe_drift, Some(0.3));
    // The mock backend measures the same figures both times: only the drift differs, added in quadrature.
    let z = trainbench::predict::uncertainty::Z80;
    let expected = z * ((steady_w / z).powi(2) + 0.09).sqrt();
    let w = half_width(&hw);
    assert!((w - expected).abs() < 1e-9, "{w} against {expected} (steady {steady_w})");
    // `predict` says how much of the interval is the drift; a profile without one says nothing of it.
    let text = |hw: &std::path::Path| {
        let o = tb().args(["predict", "specs/smoke/mlp.toml", "--hardware"]).arg(hw).output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let drifting_text = text(&hw);
    assert!(
        drifting_text.contains("the machine's drift while it was calibrated (0.300): alone, x0.68 to x1.47"),
        "{drifting_text}"
    );
    assert!(!text(&steady).contains("drift"));
    let j = tb().args(["predict", "specs/smoke/mlp.toml", "--format", "json", "--hardware"]).arg(&hw).output().unwrap();
    let j: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    assert_eq!(j["predictions"][0]["machine_drift"].as_f64(), Some(0.3));
}
