//! `trainbench compare` end to end on synthetic results: injected slowdowns, noise, comparability, formats.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use assert_cmd::Command;

use crate::common::Synth;

fn tb() -> Command {
    Command::cargo_bin("trainbench").unwrap()
}

fn write_set(dir: &std::path::Path, seed: u64, f: impl Fn(Synth) -> Synth) {
    for batch in [8, 32] {
        for repeat in 0..3 {
            f(Synth::new("toy", batch, repeat, seed * 100 + repeat as u64 + batch as u64)).write(dir);
        }
    }
}

#[test]
fn a_20_percent_slowdown_is_a_regression() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, cand) = (tmp.path().join("base"), tmp.path().join("cand"));
    write_set(&base, 1, |s| s);
    write_set(&cand, 2, |s| s.slowdown(1.2));
    let out = tb().args(["compare"]).arg(&base).arg(&cand).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_eq!(text.matches("┆ SLOWER (regression)").count(), 2, "{text}");
    assert!(text.contains("Regression found."), "{text}");
}

#[test]
fn different_seeds_are_no_change_and_a_speedup_is_faster() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, cand, fast) = (tmp.path().join("base"), tmp.path().join("cand"), tmp.path().join("fast"));
    write_set(&base, 1, |s| s);
    write_set(&cand, 2, |s| s);
    write_set(&fast, 3, |s| s.slowdown(0.8));
    let out = tb().args(["compare", "--format", "json"]).arg(&base).arg(&cand).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let verdicts: Vec<&str> = v["pairs"].as_array().unwrap().iter().map(|p| p["verdict"].as_str().unwrap()).collect();
    assert_eq!(verdicts, ["no_change", "no_change"]);
    assert_eq!(v["pairs"][0]["step_time"]["bootstrap"], "two-level");
    assert_eq!(v["pairs"][0]["step_time"]["repeats"], serde_json::json!([3, 3]));

    let out = tb().args(["compare", "--format", "markdown"]).arg(&base).arg(&fast).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.starts_with("| configuration |"), "{text}");
    assert_eq!(text.matches("| faster |").count(), 2, "{text}");
}

#[test]
fn a_slowdown_within_the_threshold_passes_unless_the_threshold_is_lowered() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, cand) = (tmp.path().join("base"), tmp.path().join("cand"));
    for r in 0..3 {
        Synth { spread: 0.01, iterations: 80, ..Synth::new("toy", 8, r, 10 + r as u64) }.write(&base);
        Synth { spread: 0.01, iterations: 80, ..Synth::new("toy", 8, r, 20 + r as u64).slowdown(1.03) }.write(&cand);
    }
    tb().args(["compare"]).arg(&base).arg(&cand).assert().code(0);
    tb().args(["compare", "--threshold", "1%"]).arg(&base).arg(&cand).assert().code(1);
}

#[test]
fn different_devices_or_libraries_are_not_comparable_unless_allowed() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, cand) = (tmp.path().join("base"), tmp.path().join("cand"));
    Synth::new("toy", 8, 0, 1).write(&base);
    Synth { libtorch: "2.12.0".into(), ..Synth::new("toy", 8, 0, 2).slowdown(1.5) }.write(&cand);
    let out = tb().args(["compare"]).arg(&base).arg(&cand).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("not comparable: library libtorch differs: 2.12.0")
            || text.contains("not comparable: library libtorch differs: 2.13.0 vs 2.12.0"),
        "{text}"
    );

    let out = tb().args(["compare", "--allow-env-diff"]).arg(&base).arg(&cand).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("compared despite environment differences"), "{text}");
}

#[test]
fn other_tf32_switches_are_not_comparable() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, cand) = (tmp.path().join("base"), tmp.path().join("cand"));
    Synth::new("toy", 8, 0, 1).write(&base);
    let strict = trainbench_contract::Numerics { tf32: trainbench_contract::Tf32::OFF, ..Default::default() };
    Synth { numerics: strict, ..Synth::new("toy", 8, 0, 2).slowdown(1.5) }.write(&cand);
    let out = tb().args(["compare"]).arg(&base).arg(&cand).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("not comparable: TF32 differs: cudnn vs off"), "{text}");
}

#[test]
fn another_cpu_instruction_set_level_is_not_comparable() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, cand, old) = (tmp.path().join("base"), tmp.path().join("cand"), tmp.path().join("old"));
    Synth { cpu_isa: Some("AVX512_CORE".into()), ..Synth::new("toy", 8, 0, 1) }.write(&base);
    Synth::new("toy", 8, 0, 2).write(&cand);
    let out = tb().args(["compare"]).arg(&base).arg(&cand).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("not comparable: CPU ISA differs: AVX512_CORE vs AVX2"), "{text}");

    // A baseline written before the level was recorded is still compared; the difference is only noted.
    Synth { cpu_isa: None, ..Synth::new("toy", 8, 0, 1) }.write(&old);
    let out = tb().args(["compare", "--format", "json"]).arg(&old).arg(&cand).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pair = &v["pairs"][0];
    assert_eq!(pair["verdict"], "no_change", "{pair}");
    let isa = pair["env_differences"].as_array().unwrap().iter().find(|d| d["field"] == "CPU ISA").unwrap();
    assert_eq!((&isa["baseline"], &isa["candidate"], &isa["blocking"]), (&"-".into(), &"AVX2".into(), &false.into()));
}

#[test]
fn unpaired_runs_are_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, cand) = (tmp.path().join("base"), tmp.path().join("cand"));
    Synth::new("toy", 8, 0, 1).write(&base);
    Synth::new("toy", 16, 0, 1).write(&base);
    Synth::new("toy", 8, 0, 2).write(&cand);
    Synth::new("other", 8, 0, 2).write(&cand);
    let out = tb().args(["compare"]).arg(&base).arg(&cand).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("only in baseline: toy.b16.fp32.1x1"), "{text}");
    assert!(text.contains("only in candidate: other.b8.fp32.1x1"), "{text}");
}

#[test]
fn bad_inputs_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.json");
    std::fs::write(&bad, "{\"format_version\": 99}").unwrap();
    let out = tb().args(["compare"]).arg(&bad).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("format version 99"));
    tb().args(["compare", "--threshold", "5"]).arg(&bad).arg(&bad).assert().code(2);
}

#[test]
fn an_erratic_candidate_is_called_out_because_its_spread_raises_the_threshold() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, cand) = (tmp.path().join("base"), tmp.path().join("cand"));
    write_set(&base, 1, |s| s);
    // One candidate repeat in three runs 60% slower: the candidate's own repeats differ by about that much.
    write_set(&cand, 2, |s| if s.repeat == 1 { s.slowdown(1.6) } else { s });
    let out = tb().args(["compare", "--format", "json"]).arg(&base).arg(&cand).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for p in v["pairs"].as_array().unwrap() {
        let spread = p["step_time"]["repeat_spread"].as_array().unwrap();
        assert!(spread[0].as_f64().unwrap() < 0.05 && spread[1].as_f64().unwrap() > 0.4, "{spread:?}");
        assert_eq!(p["step_time"]["threshold"], p["step_time"]["noise_floor"]);
        let notes: Vec<&str> = p["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
        assert!(notes.iter().any(|n| n.contains("the candidate is less stable run to run")), "{notes:?}");
    }
}
