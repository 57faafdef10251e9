//! Audit's integrity checks: a consistent result passes; edits to figures, samples or the embedded spec are
//! caught and name the field.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use trainbench::audit::{AuditOptions, AuditVerdict, assess, audit, verify};
use trainbench::result::RunResult;

use crate::common::Synth;

fn fields(r: &RunResult) -> Vec<String> {
    verify(r).into_iter().map(|i| i.field).collect()
}

#[test]
fn a_consistent_result_passes() {
    assert_eq!(verify(&Synth::new("toy", 8, 0, 1).build()), vec![]);
}

#[test]
fn edits_are_detected() {
    let base = Synth::new("toy", 8, 0, 1).build();

    let mut r = base.clone();
    r.metrics.as_mut().unwrap().throughput.samples_per_s *= 1.1;
    assert!(fields(&r).contains(&"metrics.throughput.samples_per_s".to_string()), "{:?}", verify(&r));

    let mut r = base.clone();
    r.metrics.as_mut().unwrap().step_times_s[20] *= 0.5;
    let f = fields(&r);
    assert!(f.contains(&"metrics.step_time.mean_s".to_string()), "{f:?}");
    assert!(f.contains(&"metrics.throughput.samples_per_s".to_string()), "{f:?}");

    let mut r = base.clone();
    r.environment.spec_canonical = r.environment.spec_canonical.replace("iterations = 40", "iterations = 41");
    assert_eq!(fields(&r), ["environment.spec_sha256"]);

    let mut r = base.clone();
    r.metrics.as_mut().unwrap().step_times_s.pop();
    assert!(fields(&r).contains(&"metrics.step_times_s".to_string()));

    let mut r = base.clone();
    r.metrics.as_mut().unwrap().memory.measured.peak_allocated_bytes = Some(1);
    assert_eq!(fields(&r), ["metrics.memory.measured.activations_and_workspace_bytes"]);

    let mut r = base;
    r.spec_name = "other".into();
    assert_eq!(fields(&r), ["spec_name"]);
}

#[test]
fn audit_does_not_rerun_an_edited_result() {
    let mut r = Synth::new("toy", 8, 0, 1).build();
    r.metrics.as_mut().unwrap().step_time.median_s *= 0.9;
    let report = audit(&r, &AuditOptions::default(), |_| panic!("must not re-run")).unwrap();
    assert_eq!(report.verdict, AuditVerdict::Invalid);
    assert_eq!(report.integrity[0].field, "metrics.step_time.median_s");
}

#[test]
fn assess_applies_the_tolerance() {
    let original = Synth::new("toy", 8, 0, 1).build();
    let same = Synth::new("toy", 8, 0, 2).build();
    let slow = Synth::new("toy", 8, 0, 3).slowdown(1.25).build();
    let opts = AuditOptions::default();
    assert_eq!(assess(&original, &same, &opts).verdict, AuditVerdict::Reproduced);
    let r = assess(&original, &slow, &opts);
    assert_eq!(r.verdict, AuditVerdict::NotReproduced);
    assert!(r.reasons.iter().any(|x| x.contains("median step time rose")), "{:?}", r.reasons);
    let loose = AuditOptions { tolerance: 0.3, ..AuditOptions::default() };
    assert_eq!(assess(&original, &slow, &loose).verdict, AuditVerdict::Reproduced);
    // Another device is reported as a difference.
    let elsewhere = Synth { device: "Other CPU".into(), ..Synth::new("toy", 8, 0, 2) }.build();
    let r = assess(&original, &elsewhere, &opts);
    assert!(r.env_differences.iter().any(|d| d.field == "device" && d.blocking));
}

/// A mock run of 25,000 measured steps (past the step log's cap of 10,000 kept), through the CLI, and audit's
/// integrity check of its folder (audit takes a folder as report does).
#[test]
fn a_run_past_the_step_cap_is_consistent_and_edits_to_it_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    let spec = crate::common::mock_mlp_spec(dir.path(), "long", 25_000, 1);
    let out = dir.path().join("out");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_trainbench"))
        .args(["run", spec.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let audit = std::process::Command::new(env!("CARGO_BIN_EXE_trainbench"))
        .args(["audit", "--integrity-only", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(audit.status.success(), "{}", String::from_utf8_lossy(&audit.stdout));
    assert!(String::from_utf8_lossy(&audit.stdout).contains("integrity: ok"));

    let path = out.join("long/long.b2.fp32.1x1.r0.json");
    let r: RunResult = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let m = r.metrics.as_ref().unwrap();
    assert_eq!((m.samples_seen, m.samples_kept), (Some(25_000), Some(10_000)));
    assert_eq!(m.step_indices.as_ref().map(Vec::len), Some(10_000));
    assert!(m.step_time.percentile_relative_error.is_some());
    assert_eq!(verify(&r), vec![]);

    let mut edited = r.clone();
    edited.metrics.as_mut().unwrap().step_time.n -= 1;
    assert!(fields(&edited).contains(&"metrics.step_time.n".to_string()), "{:?}", verify(&edited));
    let mut edited = r.clone();
    edited.metrics.as_mut().unwrap().step_indices.as_mut().unwrap().reverse();
    assert!(fields(&edited).contains(&"metrics.step_indices".to_string()), "{:?}", verify(&edited));
    let mut edited = r;
    edited.metrics.as_mut().unwrap().step_time.max_s *= 0.5;
    assert!(!verify(&edited).is_empty(), "a max below the kept steps is caught");
}
