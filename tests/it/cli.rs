//! The spec commands end to end: `validate` (text and JSON, files and folders, `--set`), `plan`; and the arguments
//! every command shares (`--format text|json`, `--json`).

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Output;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn trainbench(args: &[&str]) -> Output {
    assert_cmd::Command::new(env!("CARGO_BIN_EXE_trainbench")).current_dir(root()).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn settings() -> insta::Settings {
    let mut s = crate::common::golden_settings("cli");
    s.set_omit_expression(true);
    s
}

/// Replace SHA-256 digests (64 hex digits) by `[SHA256]`: they change whenever a spec type gains a field.
fn redact(text: &str) -> String {
    let mut out = String::new();
    let mut run = String::new();
    for c in text.chars().chain(std::iter::once('\n')) {
        if c.is_ascii_hexdigit() && !c.is_ascii_uppercase() {
            run.push(c);
            continue;
        }
        out.push_str(if run.len() == 64 { "[SHA256]" } else { &run });
        run.clear();
        out.push(c);
    }
    out.pop();
    out
}

#[test]
fn json_format_gives_the_same_diagnostics_machine_readably() {
    let o =
        trainbench(&["validate", "--format", "json", "tests/invalid/unknown-key-typo.toml", "specs/smoke/mlp.toml"]);
    assert_eq!(o.status.code(), Some(2));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(report["valid"], 1);
    assert_eq!(report["invalid"], 1);
    let bad = &report["files"][0];
    assert_eq!(bad["file"], "tests/invalid/unknown-key-typo.toml");
    assert_eq!(bad["valid"], false);
    let d = &bad["diagnostics"][0];
    assert_eq!(d["severity"], "error");
    assert_eq!((d["line"].as_u64(), d["column"].as_u64()), (Some(12), Some(1)));
    assert_eq!(d["path"], "sweep.batch_szie");
    assert_eq!(d["hint"], "did you mean `batch_sizes`?");
    assert_eq!(d["snippet"]["text"], "batch_szie = [32, 64]");
    let good = &report["files"][1];
    assert_eq!(good["valid"], true);
    assert_eq!(good["name"], "smoke-mlp");
    assert_eq!(good["runs"], 6);
    assert_eq!(good["sha256"].as_str().unwrap().len(), 64);
    settings().bind(|| insta::assert_snapshot!("validate-json", redact(&stdout(&o))));
}

#[test]
fn all_specs_in_the_repository_are_valid() {
    let o = trainbench(&["validate", "specs"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let count = stdout(&o).lines().filter(|l| l.starts_with("ok: ")).count();
    assert!(count >= 20, "{count} specs");
    assert!(stdout(&o).ends_with("all valid (0 warnings)\n"), "{}", stdout(&o));
}

#[test]
fn tbd_specs_validate_at_smoke_scale_with_overrides() {
    let o = trainbench(&[
        "validate",
        "specs/tbd",
        "--set",
        "topology.device=cpu",
        "--set",
        "sweep.batch_sizes=[2]",
        "--set",
        "run.warmup=1",
        "--set",
        "run.iterations=2",
        "--set",
        "run.repeats=1",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(stdout(&o).matches(", 1 run)").count(), 8, "{}", stdout(&o));
}

#[test]
fn a_folder_without_specs_is_an_error_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a spec").unwrap();
    let o =
        assert_cmd::Command::new(env!("CARGO_BIN_EXE_trainbench")).arg("validate").arg(dir.path()).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let text = stdout(&o);
    assert!(text.contains("no spec files (`*.toml`) in this folder or below"), "{text}");
    assert!(text.contains("hint: pass spec files"), "{text}");
}

#[test]
fn folders_are_searched_recursively_and_missing_paths_reported() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("a/b");
    std::fs::create_dir_all(&nested).unwrap();
    std::fs::copy(root().join("specs/smoke/mlp.toml"), nested.join("mlp.toml")).unwrap();
    std::fs::copy(root().join("tests/invalid/bad-name.toml"), dir.path().join("bad.toml")).unwrap();
    let o = assert_cmd::Command::new(env!("CARGO_BIN_EXE_trainbench"))
        .arg("validate")
        .arg(dir.path())
        .arg(dir.path().join("missing.toml"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let text = stdout(&o);
    assert!(text.contains("mlp.toml (smoke-mlp, 6 runs)"), "{text}");
    assert!(text.contains("is not a valid `name`"), "{text}");
    assert!(text.contains("missing.toml") && text.contains("cannot read this path"), "{text}");
    assert!(text.ends_with("checked 3 spec files: 2 invalid, 1 valid (2 errors, 0 warnings)\n"), "{text}");
}

#[test]
fn errors_in_overrides_point_at_the_override() {
    let o = trainbench(&[
        "validate",
        "specs/smoke/mlp.toml",
        "--set",
        "run.iterations=abc",
        "--set",
        "sweep.batch_sizes=[0,2]",
    ]);
    assert_eq!(o.status.code(), Some(2));
    settings().bind(|| insta::assert_snapshot!("override-errors", stdout(&o)));
    let malformed = trainbench(&["validate", "specs/smoke/mlp.toml", "--set", "run.iterations"]);
    assert_eq!(malformed.status.code(), Some(2));
    assert!(stdout(&malformed).contains("override `run.iterations` has no `=`"), "{}", stdout(&malformed));
}

#[test]
fn plan_prints_the_sweep_product() {
    let o = trainbench(&["plan", "specs/extra/bert_base.toml", "--set", "run.repeats=2"]);
    assert_eq!(o.status.code(), Some(0));
    settings().bind(|| insta::assert_snapshot!("plan-bert-repeats", redact(&stdout(&o))));
}

#[test]
fn plan_json_lists_every_run() {
    // On the CPU: with the tch backend built, a machine without a GPU refuses to plan its CUDA ranks.
    let o =
        trainbench(&["plan", "--format", "json", "specs/pai/ps_vs_allreduce.toml", "--set", "topology.device=\"cpu\""]);
    assert_eq!(o.status.code(), Some(0));
    let plan: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let runs = plan["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6);
    assert_eq!(runs[0]["id"], "pai-ps-vs-allreduce.b256.fp32.2x4-ps-ethernet.r0");
    assert_eq!(runs[0]["strategy"]["kind"], "parameter-server");
    assert_eq!(
        (&runs[0]["world_size"], &runs[0]["nodes"], &runs[0]["devices_per_node"]),
        (&8.into(), &2.into(), &4.into())
    );
    assert_eq!(runs[1]["seed"], 43);
    assert_eq!(runs[3]["interconnect"], "nvlink");
    assert!(plan["backend"].is_string(), "{plan}");
}

#[test]
fn plan_of_an_invalid_spec_exits_2_with_diagnostics() {
    let o = trainbench(&["plan", "specs/extra/bert_base.toml", "--set", "topology.device=cpu"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("precision `fp16` is not supported by the tch backend on `cpu`"), "{}", stdout(&o));
}

#[test]
fn every_command_with_structured_output_takes_format_json() {
    let result = "tests/fixtures/results/fixture-resnet/fixture-resnet.b16.fp32.1x1.r0.json";
    let fixtures = "tests/fixtures/results";
    let commands: [&[&str]; 7] = [
        &["validate", "specs/smoke/mlp.toml"],
        &["plan", "specs/smoke/mlp.toml"],
        &["analyze", "specs/smoke/mlp.toml"],
        &["devices"],
        &["audit", "--integrity-only", result],
        &["compare", fixtures, fixtures],
        &[
            "run",
            "--backend",
            "mock",
            "--set",
            "run.repeats=1",
            "--set",
            "sweep.batch_sizes=[2]",
            "specs/smoke/mlp.toml",
        ],
    ];
    let dir = tempfile::tempdir().unwrap();
    // Each `run` writes to a folder of its own.
    let mut runs = 0;
    let mut with_out = |args: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        if args[0] == "run" {
            runs += 1;
            args.extend(["--out".to_string(), dir.path().join(runs.to_string()).display().to_string()]);
        }
        args
    };
    for args in commands {
        for format in [["--format", "json"].as_slice(), &["--json"]] {
            if format == ["--json"] && args[0] == "compare" {
                continue; // compare has three formats (table, markdown, json) and never had `--json`
            }
            let full = with_out(&[args, format].concat());
            let o = trainbench(&full.iter().map(String::as_str).collect::<Vec<_>>());
            assert!(o.status.code().is_some_and(|c| c <= 1), "{args:?} {format:?}: {o:?}");
            let json: Result<serde_json::Value, _> = serde_json::from_str(&stdout(&o));
            assert!(json.is_ok(), "{args:?} {format:?} does not print JSON: {}", stdout(&o));
        }
        // `text` is the default everywhere (compare calls it `table` and accepts `text`).
        let full = with_out(&[args, &["--format", "text"]].concat());
        let o = trainbench(&full.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(o.status.code().is_some_and(|c| c <= 1), "{args:?} --format text: {o:?}");
        assert!(serde_json::from_str::<serde_json::Value>(&stdout(&o)).is_err(), "{args:?}: {}", stdout(&o));
    }
    let both = trainbench(&["devices", "--json", "--format", "text"]);
    assert_eq!(both.status.code(), Some(2));
}

#[test]
fn run_help_lists_the_shared_arguments() {
    let o = trainbench(&["run", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    settings().bind(|| insta::assert_snapshot!("run-help", stdout(&o)));
}
