//! Issue 43: the smoke GPT at batch 4 on 2 ranks, run once per data-parallel strategy (all-reduce, ZeRO-1/2/3)
//! into four folders on the mock backend (which simulates every topology in one process; a slowdown per
//! strategy gives each its own throughput). Each run id names its strategy, the report has one row per
//! strategy with that folder's own samples/s and memory, and `check --update` writes four golden files. The
//! same four results rewritten as results were written before (one run id for all four) still load, are
//! still four rows, each named with its strategy, and still get four golden files; compare pairs an old
//! result with a new one of the same plan.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use trainbench::report::ReportModel;
use trainbench::result::identity::ConfigurationIdentity;
use trainbench::result::{LoadedResult, RunResult, load};

/// The strategies, the token each gets in the run id, and the mock slowdown its folder ran with.
const STRATEGIES: [(&str, &str, &str); 4] =
    [("all-reduce", "ar", "1"), ("zero-1", "z1", "1.25"), ("zero-2", "z2", "1.5"), ("zero-3", "z3", "2")];

/// The run id every strategy had before the strategy was in every data-parallel id.
const OLD_ID: &str = "llm-smoke-gpt.b4.fp32.1x2.ckpt-full.r0";

fn tb() -> Command {
    Command::cargo_bin("trainbench").unwrap()
}

/// `trainbench run specs/llm/smoke_gpt.toml` as the issue ran it, on the mock backend, into `<results>/<strategy>`.
fn run_strategies(results: &Path) {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("specs/llm/smoke_gpt.toml");
    for (strategy, _, slowdown) in STRATEGIES {
        let out = tb()
            .arg("run")
            .arg(&spec)
            .args(["--backend", "mock", "--mock-slowdown", slowdown, "--quiet"])
            .args(["--set", "sweep.batch_sizes=[4]", "--set", "run.repeats=1", "--set", "topology.devices_per_node=2"])
            .args(["--set", &format!("topology.strategy=\"{strategy}\"")])
            .args(["--set", "training.activation_checkpointing=\"full\""])
            .arg("--out")
            .arg(results.join(strategy))
            .output()
            .unwrap();
        assert!(out.status.success(), "{strategy}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// The one result of a strategy's folder.
fn result_of(results: &Path, strategy: &str) -> (PathBuf, RunResult) {
    let loaded = load::load_all(&[results.join(strategy)]).unwrap();
    assert_eq!(loaded.len(), 1, "{strategy}: {loaded:?}");
    let LoadedResult { path, result } = loaded.into_iter().next().unwrap();
    (path, result)
}

/// The report model of a results folder: one row per strategy, each holding its own folder's single run, with
/// that run's samples/s and peak memory; the rows' names as the report shows them.
fn rows_hold_their_own_runs(results: &Path) -> Vec<String> {
    let loaded = load::load_all(&[results]).unwrap();
    let model = ReportModel::new(&loaded);
    assert_eq!(model.configs.len(), 4, "{:?}", model.configs.iter().map(|c| &c.config).collect::<Vec<_>>());
    let mut names = Vec::new();
    for (strategy, _, _) in STRATEGIES {
        let (_, own) = result_of(results, strategy);
        let row = model.configs.iter().find(|c| c.strategy() == strategy).unwrap();
        assert_eq!(
            row.runs.len(),
            1,
            "{strategy}: pooled with {:?}",
            row.runs.iter().map(|r| &r.run_id).collect::<Vec<_>>()
        );
        assert_eq!(row.outcome_summary(), "completed");
        let sps = own.metrics.as_ref().unwrap().throughput.samples_per_s;
        assert_eq!(row.samples_per_s(), Some(sps), "{strategy}");
        assert_eq!(row.samples_per_s_spread().unwrap().interval(), None, "{strategy}: one run, no spread");
        let peak = own.metrics.as_ref().unwrap().memory.measured.peak_allocated_bytes;
        assert_eq!(row.peak_memory().map(|m| m.bytes), peak, "{strategy}");
        assert_eq!(row.identity, ConfigurationIdentity::of(&own));
        names.push(row.config.clone());
    }
    // Each strategy ran at its own speed: four different throughputs, none pooled.
    let mut rates: Vec<u64> = model.configs.iter().map(|c| c.samples_per_s().unwrap().to_bits()).collect();
    rates.sort_unstable();
    rates.dedup();
    assert_eq!(rates.len(), 4);
    names
}

/// `trainbench report RESULTS --out DIR`: the Markdown report.
fn report_markdown(results: &Path, out: &Path) -> String {
    tb().arg("report").arg(results).arg("--out").arg(out).assert().success();
    std::fs::read_to_string(out.join("report.md")).unwrap()
}

/// `trainbench check --update`: the golden files it wrote, sorted.
fn golden_files(results: &Path, golden: &Path) -> Vec<String> {
    let out = tb().arg("check").arg("--update").arg("--golden").arg(golden).arg(results).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let mut files: Vec<String> = std::fs::read_dir(golden.join("llm-smoke-gpt"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    files
}

fn expected_golden_files() -> Vec<String> {
    let mut v: Vec<String> = STRATEGIES
        .iter()
        .map(|(_, token, _)| format!("llm-smoke-gpt.b4.fp32.1x2-{token}.ckpt-full.shape.json"))
        .collect();
    v.sort();
    v
}

#[test]
fn four_strategies_are_four_rows_with_their_own_figures_and_four_golden_files() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results/strategies");
    run_strategies(&results);
    for (strategy, token, _) in STRATEGIES {
        let (path, r) = result_of(&results, strategy);
        let id = format!("llm-smoke-gpt.b4.fp32.1x2-{token}.ckpt-full.r0");
        assert_eq!((r.run_id.as_str(), r.plan.topology.strategy.name()), (id.as_str(), strategy));
        assert_eq!(path.file_name().unwrap().to_string_lossy(), format!("{id}.json"));
    }
    let names = rows_hold_their_own_runs(&results);
    assert!(names.iter().all(|n| !n.contains(" · ")), "the ids already differ: {names:?}");

    let md = report_markdown(&results, &tmp.path().join("report"));
    assert!(md.contains("4 runs in 4 configurations of 1 spec(s)"), "{md}");
    for (_, token, _) in STRATEGIES {
        let id = format!("llm-smoke-gpt.b4.fp32.1x2-{token}.ckpt-full");
        assert!(md.contains(&format!("| {id} |")), "{id} has no row: {md}");
    }
    assert_eq!(golden_files(&results, &tmp.path().join("golden")), expected_golden_files());
}

/// The four results as written before the strategy was in every data-parallel id: one run id for all four, no
/// `config` in the plan.
fn write_as_before(results: &Path, old: &Path) {
    for (strategy, _, _) in STRATEGIES {
        let (_, r) = result_of(results, strategy);
        let mut json = serde_json::to_value(&r).unwrap();
        json["run_id"] = OLD_ID.into();
        json["plan"]["id"] = OLD_ID.into();
        json["plan"].as_object_mut().unwrap().remove("config");
        let dir = old.join(strategy);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{OLD_ID}.json")), serde_json::to_string_pretty(&json).unwrap()).unwrap();
    }
}

#[test]
fn results_of_one_old_run_id_with_four_strategies_are_still_four_rows_named_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let (results, old) = (tmp.path().join("new"), tmp.path().join("old"));
    run_strategies(&results);
    write_as_before(&results, &old);
    for (strategy, _, _) in STRATEGIES {
        let (_, r) = result_of(&old, strategy);
        assert_eq!(
            (r.run_id.as_str(), r.config_id(), r.plan.config.as_str()),
            (OLD_ID, "llm-smoke-gpt.b4.fp32.1x2.ckpt-full", "")
        );
    }

    let names = rows_hold_their_own_runs(&old);
    let expected: Vec<String> =
        STRATEGIES.iter().map(|(s, _, _)| format!("llm-smoke-gpt.b4.fp32.1x2.ckpt-full · strategy {s}")).collect();
    assert_eq!(names, expected);

    let md = report_markdown(&old, &tmp.path().join("report"));
    assert!(md.contains("4 runs in 4 configurations of 1 spec(s)"), "{md}");
    for name in &names {
        assert!(md.contains(&format!("| {name} |")), "{name} has no row: {md}");
    }
    // Golden files are named as the plans are named now: one per strategy.
    assert_eq!(golden_files(&old, &tmp.path().join("golden")), expected_golden_files());

    // compare pairs an old result with the new one of the same plan (comparable), and two strategies under the
    // old id are not comparable, the difference named.
    let compare = |a: &Path, b: &Path| {
        let out = tb().arg("compare").arg(a).arg(b).args(["--format", "json"]).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{e}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
        });
        v
    };
    let same = compare(&old.join("zero-2"), &results.join("zero-2"));
    let pairs = same["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 1, "{same}");
    assert_ne!(pairs[0]["verdict"], "not_comparable", "{same}");
    assert!(same["only_in_baseline"].as_array().unwrap().is_empty(), "{same}");
    let apart = compare(&old.join("all-reduce"), &old.join("zero-2"));
    let pairs = apart["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 1, "{apart}");
    assert_eq!(pairs[0]["verdict"], "not_comparable", "{apart}");
    let named = pairs[0]["env_differences"].as_array().unwrap().iter().any(|d| {
        d["field"] == "strategy" && d["baseline"] == "all-reduce" && d["candidate"] == "zero-2" && d["blocking"] == true
    });
    assert!(named, "{apart}");
}
