//! `trainbench history` end to end on the embedded SQLite store: record / list / show / detect / ack /
//! rebuild round trips, concurrent writers, a newer or corrupt store, refused results, the gate's exit codes,
//! and `run --record`. [`suite`] holds the checks every store must pass; `history_pg` runs them on PostgreSQL.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;
use trainbench::result::RunResult;

use crate::common::Synth;

pub fn tb() -> Command {
    Command::cargo_bin("trainbench").unwrap()
}

/// One point: `repeats` runs of the `toy` b8 configuration, started at minute `minute`, with `slowdown` and
/// `libtorch`, written to `<dir>/p<minute>/`.
pub fn write_point(dir: &Path, minute: u32, slowdown: f64, libtorch: &str, repeats: u32) -> PathBuf {
    let folder = dir.join(format!("p{minute:03}"));
    std::fs::create_dir_all(&folder).unwrap();
    for repeat in 0..repeats {
        let mut r: RunResult = Synth {
            libtorch: libtorch.into(),
            ..Synth::new("toy", 8, repeat, u64::from(minute) * 10 + u64::from(repeat) + 1).slowdown(slowdown)
        }
        .build();
        r.environment.started_at = format!("2026-11-01T{:02}:{:02}:{repeat:02}Z", minute / 60, minute % 60);
        std::fs::write(folder.join(format!("{}.json", r.run_id)), serde_json::to_string_pretty(&r).unwrap()).unwrap();
    }
    folder
}

/// Run `trainbench history ARGS --store STORE`: (exit code, stdout, stderr).
pub fn history(store: &str, args: &[&str]) -> (i32, String, String) {
    let out = tb().arg("history").args(args).args(["--store", store]).env_remove("TRAINBENCH_STORE").output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The answers `rebuild` must reproduce byte for byte.
fn answers(store: &str) -> Vec<String> {
    let mut out = Vec::new();
    for args in [
        &["list", "--format", "json"][..],
        &["list"],
        &["detect", "--format", "json"],
        &["detect", "--format", "markdown"],
        &["show", ":step_time", "--format", "json"],
        &["show", ":step_time"],
    ] {
        out.push(history(store, args).1);
    }
    out
}

/// Record, list, show, detect, ack and rebuild on `store`; `tmp` holds the result files.
pub fn round_trip(store: &str, tmp: &Path) {
    let results = tmp.join("results");
    for minute in 0..12 {
        let (slowdown, libtorch) = if minute < 6 { (1.0, "2.12.0") } else { (1.25, "2.13.0") };
        write_point(&results, minute, slowdown, libtorch, 3);
    }
    let results_arg = results.to_str().unwrap();
    let (code, out, err) = history(store, &["record", results_arg, "--revision", "r1"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("recorded 36 new run(s)"), "{out}");
    let (code, out, _) = history(store, &["record", results_arg, "--revision", "r1"]);
    assert_eq!((code, out.contains("recorded 0 new run(s)")), (0, true), "{out}");

    let list = json(&history(store, &["list", "--format", "json"]).1);
    let names: Vec<&str> = list["series"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert!(names.iter().any(|n| n.starts_with("toy.b8.fp32.1x1#") && n.ends_with(":step_time")), "{names:?}");
    assert!(names.iter().any(|n| n.ends_with(":throughput")), "{names:?}");
    let step = list["series"].as_array().unwrap().iter().find(|s| s["metric"] == "step_time").unwrap();
    assert_eq!(step["points"], 12, "{step}");

    let (code, out, _) = history(store, &["detect"]);
    assert_eq!(code, 1, "a regression not acknowledged: {out}");
    assert!(out.contains("libtorch 2.12.0 -> 2.13.0"), "{out}");
    assert!(out.contains("#6 ("), "the first point after the change: {out}");
    let detected = json(&history(store, &["detect", "--format", "json"]).1);
    let step = detected["series"].as_array().unwrap().iter().find(|s| s["metric"] == "step_time").unwrap();
    let change = &step["detection"]["changes"][0];
    assert_eq!((change["first_point"]["index"].as_u64(), change["direction"].as_str()), (Some(6), Some("regression")));

    let show = json(&history(store, &["show", ":step_time", "--format", "json"]).1);
    assert_eq!(show["points"].as_array().unwrap().len(), 12);
    assert_eq!(show["points"][0]["run_ids"].as_array().unwrap().len(), 3, "repeats pooled into one point");
    assert!(show["points"][0]["sources"][0].as_str().unwrap().ends_with(".json"));

    let before = answers(store);
    let (code, out, err) = history(store, &["ack", ":step_time", "--at", "6", "--why", "libtorch 2.13 upgrade"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = history(store, &["detect", ":step_time"]);
    assert_eq!(code, 0, "acknowledged: statistics restart at #6: {out}");
    assert!(out.contains("too few points"), "6 points since the restart: {out}");
    let (_, out, _) = history(store, &["show", ":step_time"]);
    assert!(out.contains("acknowledged: libtorch 2.13 upgrade"), "{out}");

    let page = tmp.join("page");
    let (code, out, err) = history(store, &["report", "--out", page.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let html = std::fs::read_to_string(page.join("history.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("libtorch 2.12.0 -&gt; 2.13.0"), "{html}");
    assert!(
        html.contains("acknowledged at #6: libtorch 2.13 upgrade") && html.contains("href=\"../results/p000/"),
        "{html}"
    );

    let acked = answers(store);
    assert_ne!(before, acked);
    let (code, out, err) = history(store, &["rebuild", results_arg, "--revision", "other"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 acknowledged change(s) kept"), "{out}");
    assert_eq!(answers(store), acked, "rebuild gives byte-for-byte the same answers");
}

/// Two to eight `history record` processes at once on `store`: nothing lost, nothing duplicated.
pub fn concurrent(store: &str, tmp: &Path, processes: usize) {
    let results = tmp.join("concurrent");
    let folders: Vec<PathBuf> = (0..16).map(|m| write_point(&results, m, 1.0, "2.13.0", 2)).collect();
    let children: Vec<std::process::Child> = (0..processes)
        .map(|i| {
            // Each process records an overlapping half of the folders.
            let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("trainbench"));
            cmd.args(["history", "record", "--store", store]);
            for (n, folder) in folders.iter().enumerate() {
                if (n + i) % 2 == 0 || n % 4 == i % 4 {
                    cmd.arg(folder);
                }
            }
            cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap()
        })
        .collect();
    let mut added = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
        let n: usize = text.split("recorded ").nth(1).and_then(|t| t.split(' ').next()).unwrap().parse().unwrap();
        added += n;
    }
    assert_eq!(added, 32, "each run recorded exactly once");
    let show = json(&history(store, &["show", ":step_time", "--format", "json"]).1);
    let runs: usize = show["points"].as_array().unwrap().iter().map(|p| p["run_ids"].as_array().unwrap().len()).sum();
    assert_eq!((show["points"].as_array().unwrap().len(), runs), (16, 32));
}

/// The gate's three outcomes and bad input on `store`.
pub fn gate(store: &str, tmp: &Path) {
    let base = tmp.join("gate-base");
    for minute in 0..4 {
        let folder = write_point(&base, minute, 1.0, "2.13.0", 3);
        let (code, out, err) = history(store, &["record", folder.to_str().unwrap(), "--revision", "base0001"]);
        assert_eq!(code, 0, "{out}{err}");
    }
    let same = write_point(&tmp.join("gate-same"), 100, 1.0, "2.13.0", 3);
    let slow = write_point(&tmp.join("gate-slow"), 101, 1.3, "2.13.0", 3);
    let gate = |folder: &Path, baseline: &str, format: &str| {
        history(store, &["gate", folder.to_str().unwrap(), "--baseline", baseline, "--format", format])
    };
    let (code, out, err) = gate(&same, "base0001", "text");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("gate: pass"), "{out}");
    let (code, out, _) = gate(&slow, "base0001", "markdown");
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("## trainbench gate: **regression**"), "{out}");
    // Three candidate runs against the last two points' six: the runs' t-test uses the size of the gap (a rank
    // test of the run medians could not reach p < 0.01 with so few runs, its smallest p being 2/84).
    let (code, out, _) = gate(&slow, "last:2", "json");
    assert_eq!(code, 1, "{out}");
    assert_eq!(json(&out)["series"][0]["baseline_runs"], 6);
    let (code, out, _) = gate(&slow, "last:4", "json");
    assert_eq!(code, 1, "{out}");
    let verdict = json(&out);
    assert_eq!((verdict["format"].as_str(), verdict["version"].as_u64()), (Some("trainbench-gate"), Some(1)));
    assert_eq!(verdict["series"][0]["baseline_runs"], 12);
    let (code, out, _) = gate(&same, "no-such-revision", "json");
    assert_eq!(code, 3, "no baseline: inconclusive, never a pass: {out}");
    assert_eq!(json(&out)["series"][0]["outcome"], "inconclusive");
    let (code, _, err) = gate(&same, "last:0", "text");
    assert_eq!(code, 2, "{err}");
}

#[test]
fn sqlite_record_list_show_detect_ack_rebuild() {
    let tmp = tempfile::tempdir().unwrap();
    round_trip(tmp.path().join("h.sqlite").to_str().unwrap(), tmp.path());
}

#[test]
fn sqlite_concurrent_writers_lose_and_duplicate_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    concurrent(tmp.path().join("h.sqlite").to_str().unwrap(), tmp.path(), 8);
}

#[test]
fn sqlite_gate_passes_fails_and_says_inconclusive() {
    let tmp = tempfile::tempdir().unwrap();
    gate(tmp.path().join("h.sqlite").to_str().unwrap(), tmp.path());
}

#[test]
fn a_newer_store_is_refused_and_left_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("h.sqlite");
    let folder = write_point(tmp.path(), 0, 1.0, "2.13.0", 1);
    assert_eq!(history(store.to_str().unwrap(), &["record", folder.to_str().unwrap()]).0, 0);
    {
        let db = rusqlite::Connection::open(&store).unwrap();
        db.execute("INSERT INTO schema_version (version) VALUES (99)", []).unwrap();
        db.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    }
    let bytes = std::fs::read(&store).unwrap();
    let other = write_point(tmp.path(), 1, 1.0, "2.13.0", 1);
    let (code, _, err) = history(store.to_str().unwrap(), &["record", other.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("schema version 99") && err.contains("not modified"), "{err}");
    assert_eq!(history(store.to_str().unwrap(), &["list"]).0, 2);
    assert_eq!(std::fs::read(&store).unwrap(), bytes, "the newer store was not modified");
    let (code, _, err) = history(store.to_str().unwrap(), &["rebuild", other.to_str().unwrap()]);
    assert_eq!(code, 2, "rebuild refuses a newer store too: {err}");
}

#[test]
fn a_corrupt_store_is_named_and_rebuild_fixes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("h.sqlite");
    std::fs::write(&store, "this is not a database ".repeat(200)).unwrap();
    let (code, _, err) = history(store.to_str().unwrap(), &["list"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains(store.to_str().unwrap()) && err.contains("history rebuild"), "{err}");
    let folder = write_point(tmp.path(), 0, 1.0, "2.13.0", 2);
    let (code, out, err) = history(store.to_str().unwrap(), &["rebuild", folder.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains(".corrupt"), "{err}");
    let (code, out, _) = history(store.to_str().unwrap(), &["list"]);
    assert_eq!(code, 0);
    assert!(out.contains("1 point(s)"), "{out}");
}

#[test]
fn inconsistent_and_newer_results_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("h.sqlite");
    let folder = write_point(tmp.path(), 0, 1.0, "2.13.0", 2);
    let file = std::fs::read_dir(&folder).unwrap().next().unwrap().unwrap().path();
    let mut edited: Value = json(&std::fs::read_to_string(&file).unwrap());
    edited["metrics"]["step_time"]["median_s"] = serde_json::json!(0.001);
    std::fs::write(&file, edited.to_string()).unwrap();
    let newer = tmp.path().join("newer.json");
    edited["format_version"] = serde_json::json!(99);
    std::fs::write(&newer, edited.to_string()).unwrap();
    let (code, out, err) =
        history(store.to_str().unwrap(), &["record", folder.to_str().unwrap(), newer.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains(file.to_str().unwrap()) && err.contains("integrity check"), "{err}");
    assert!(err.contains("newer.json") && err.contains("format version 99"), "{err}");
    assert!(out.contains("recorded 1 new run(s)"), "the consistent one is recorded: {out}");
}

#[test]
fn run_record_writes_the_file_then_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("toy.toml");
    std::fs::write(
        &spec,
        "version = 1\nname = \"rec\"\n[model]\nfamily = \"mlp\"\ninputs = 16\nhidden = [16]\nclasses = 4\n\
         [topology]\nbackend = \"mock\"\n[sweep]\nbatch_sizes = [4]\n[run]\nwarmup = 1\niterations = 8\n",
    )
    .unwrap();
    let store = tmp.path().join("h.sqlite");
    let out_dir = tmp.path().join("out");
    for _ in 0..2 {
        tb().args(["run", "--quiet", "--overwrite", "--record", "--revision", "abc1234", "--store"])
            .arg(&store)
            .arg("--out")
            .arg(&out_dir)
            .arg(&spec)
            .assert()
            .success();
    }
    let show = json(&history(store.to_str().unwrap(), &["show", ":step_time", "--format", "json"]).1);
    let show = if show["points"].is_array() { show } else { panic!("{show}") };
    assert_eq!(show["points"].as_array().unwrap().len(), 2, "{show}");
    assert_eq!(show["points"][0]["revision"], "abc1234");
    let (code, out, _) = history(store.to_str().unwrap(), &["record", out_dir.to_str().unwrap()]);
    assert_eq!((code, out.contains("recorded 0 new run(s)")), (0, true), "the store already has them: {out}");
}

#[test]
fn the_merge_base_is_the_default_ci_baseline() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "base"]);
    let base = git(&["rev-parse", "HEAD"]);
    git(&["checkout", "-q", "-b", "feature"]);
    git(&["commit", "-q", "--allow-empty", "-m", "change"]);
    let store = tmp.path().join("h.sqlite");
    let nightly = write_point(&tmp.path().join("nightly"), 0, 1.0, "2.13.0", 3);
    // The nightly job on main: `run --record` or `history record` with the revision from the CI variables.
    tb().args(["history", "record", "--store"]).arg(&store).arg(&nightly).env("GITHUB_SHA", &base).assert().success();
    // The PR job: gate against the merge-base, a Markdown comment body.
    let pr = write_point(&tmp.path().join("pr"), 1, 1.0, "2.13.0", 3);
    let out = tb()
        .args(["history", "gate", "--baseline", "merge-base", "--format", "markdown", "--store"])
        .arg(&store)
        .arg(&pr)
        .current_dir(&repo)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("**pass**") && text.contains(&format!("revision {base}")), "{text}");
}
