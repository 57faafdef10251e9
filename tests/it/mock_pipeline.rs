//! The result tools on real runner output (mock backend): compare flags an injected 20% slowdown and not a
//! change of seed; the false-alarm count over 20 pairs of repeated smoke runs; audit's three exit codes.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::path::{Path, PathBuf};

use assert_cmd::Command;

const SPEC: &str = r#"version = 1
name = "toy"

[model]
family = "mlp"
inputs = 64
hidden = [128, 128]
classes = 10

[sweep]
batch_sizes = [8, 32]

[topology]
backend = "mock"

[run]
warmup = 3
iterations = 30
repeats = 2
"#;

fn tb() -> Command {
    Command::cargo_bin("trainbench").unwrap()
}

fn spec(dir: &Path) -> PathBuf {
    let p = dir.join("toy.toml");
    std::fs::write(&p, SPEC).unwrap();
    p
}

/// Run the toy spec on the mock backend into `out`, with a seed and a slowdown factor.
fn run(spec: &Path, out: &Path, seed: u64, slowdown: f64) {
    tb().arg("run")
        .arg(spec)
        .args(["-q", "--out"])
        .arg(out)
        .args(["--set", &format!("training.seed={seed}"), "--mock-slowdown", &slowdown.to_string()])
        .assert()
        .success();
}

fn compare_json(a: &Path, b: &Path) -> (i32, serde_json::Value) {
    let out = tb().arg("compare").arg(a).arg(b).args(["--format", "json"]).output().unwrap();
    (out.status.code().unwrap(), serde_json::from_slice(&out.stdout).unwrap())
}

fn verdicts(v: &serde_json::Value) -> Vec<String> {
    v["pairs"].as_array().unwrap().iter().map(|p| p["verdict"].as_str().unwrap().to_string()).collect()
}

#[test]
fn an_injected_slowdown_is_a_regression_and_another_seed_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec(tmp.path());
    let (base, slow, reseeded) = (tmp.path().join("base"), tmp.path().join("slow"), tmp.path().join("seed"));
    run(&spec, &base, 1, 1.0);
    run(&spec, &slow, 2, 1.2);
    run(&spec, &reseeded, 3, 1.0);

    let (code, v) = compare_json(&base, &slow);
    assert_eq!(code, 1);
    assert_eq!(verdicts(&v), ["slower", "slower"]);
    for p in v["pairs"].as_array().unwrap() {
        let r = p["step_time"]["ratio"].as_f64().unwrap();
        assert!((1.15..1.25).contains(&r), "ratio {r}");
        assert_eq!(p["step_time"]["bootstrap"], "two-level");
    }

    let (code, v) = compare_json(&base, &reseeded);
    assert_eq!(code, 0);
    assert_eq!(verdicts(&v), ["no_change", "no_change"]);
}

#[test]
fn false_alarms_over_20_pairs_of_repeated_smoke_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec(tmp.path());
    let (mut alarms, mut pairs, mut worst) = (0, 0, 0.0f64);
    for i in 0..20u64 {
        let (a, b) = (tmp.path().join(format!("{i}a")), tmp.path().join(format!("{i}b")));
        run(&spec, &a, 100 + 2 * i, 1.0);
        run(&spec, &b, 101 + 2 * i, 1.0);
        let (_, v) = compare_json(&a, &b);
        for p in v["pairs"].as_array().unwrap() {
            pairs += 1;
            worst = worst.max((p["step_time"]["ratio"].as_f64().unwrap() - 1.0).abs());
            if p["verdict"] != "no_change" {
                alarms += 1;
            }
        }
    }
    println!(
        "mock backend: {alarms} false alarm(s) in {pairs} compared configurations (20 pairs of runs); largest |change| {:.2}%",
        worst * 100.0
    );
    assert_eq!(pairs, 40);
    assert_eq!(alarms, 0);
}

#[test]
fn audit_exit_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec(tmp.path());
    let (base, slow) = (tmp.path().join("base"), tmp.path().join("slow"));
    run(&spec, &base, 1, 1.0);
    run(&spec, &slow, 1, 1.3);
    let file = base.join("toy/toy.b32.fp32.1x1.r1.json");

    let out = tb().arg("audit").arg(&file).arg("-q").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("verdict: REPRODUCED"), "{text}");

    // Produced with a 1.3x slowdown the re-run does not have.
    let out = tb().arg("audit").arg(slow.join("toy/toy.b32.fp32.1x1.r1.json")).arg("-q").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("median step time fell by"), "{text}");
    assert!(text.contains("device slowdown: 1.3 vs 1"), "{text}");

    // Edited by hand: a faster throughput typed in.
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let sps = v["metrics"]["throughput"]["samples_per_s"].as_f64().unwrap();
    v["metrics"]["throughput"]["samples_per_s"] = (sps * 1.5).into();
    let edited = tmp.path().join("edited.json");
    std::fs::write(&edited, serde_json::to_string(&v).unwrap()).unwrap();
    let out = tb().arg("audit").arg(&edited).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("metrics.throughput.samples_per_s: stored"), "{text}");
    assert!(text.contains("verdict: INVALID"), "{text}");

    // Integrity only.
    tb().arg("audit").arg(&file).arg("--integrity-only").assert().code(0);
    tb().arg("audit").arg(&edited).arg("--integrity-only").assert().code(2);
}
