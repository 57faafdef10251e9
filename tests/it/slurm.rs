//! `trainbench run --on slurm` against a real single-node Slurm (`scripts/slurm-local.sh`): a smoke suite
//! submitted as a job array and waited for, every result file and the index checked; a task that fails (its
//! result path blocked by a folder) reported with its log, then resubmitted alone by `status --resume` while
//! the finished runs are neither run again nor lost. Skips with a message where Slurm cannot be started (not
//! root, no packages); under `CI=true` that is a failure. Slurm is stopped even when an assertion fails. The
//! dry run needs no Slurm.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const SPEC: &str = r#"
version = 1
name = "slurm-smoke"
[model]
family = "mlp"
inputs = 32
hidden = [64]
classes = 10
[topology]
backend = "mock"
[sweep]
batch_sizes = [8, 16, 32]
[run]
warmup = 3
iterations = 20
timeout_s = 60
"#;

const RUNS: [&str; 3] = ["slurm-smoke.b8.fp32.1x1.r0", "slurm-smoke.b16.fp32.1x1.r0", "slurm-smoke.b32.fp32.1x1.r0"];

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-local.sh")
}

/// One local Slurm at a time: its daemons listen on Slurm's fixed ports.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A single-node Slurm started for one test, stopped when dropped.
struct LocalSlurm {
    dir: tempfile::TempDir,
    _turn: std::sync::MutexGuard<'static, ()>,
}

/// How long one `trainbench` command of these tests may take before `timeout` ends it (a task Slurm never
/// starts would otherwise wait forever); Slurm is stopped afterwards all the same.
const COMMAND_LIMIT_S: &str = "180";

impl LocalSlurm {
    /// Start it, or say why not: `None` (skip) outside CI, a panic under `CI=true`.
    fn start() -> Option<LocalSlurm> {
        let turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("bash").arg(script()).arg("start").env("TRAINBENCH_SLURM_DIR", dir.path()).output();
        let why = match out {
            Ok(o) if o.status.success() => return Some(LocalSlurm { dir, _turn: turn }),
            Ok(o) => format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
            Err(e) => e.to_string(),
        };
        let _ = Command::new("bash").arg(script()).arg("stop").env("TRAINBENCH_SLURM_DIR", dir.path()).output();
        trainbench_contract::conformance::prerequisite_missing(&format!(
            "a local Slurm could not be started (scripts/slurm-local.sh start): {}",
            why.trim()
        ));
        None
    }

    fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }

    fn trainbench(&self) -> Command {
        let mut c = Command::new("timeout");
        c.args(["--kill-after=10", COMMAND_LIMIT_S, env!("CARGO_BIN_EXE_trainbench")]);
        c.env("SLURM_CONF", self.conf());
        c
    }

    /// `trainbench run SPEC --on slurm --wait` into `out` (tasks may overcommit the 2 CPUs).
    fn submit_and_wait(&self, spec: &Path, out: &Path) -> std::process::Output {
        self.trainbench()
            .args(["run", "--on", "slurm", "--wait", "--slurm-arg=--overcommit", "--out"])
            .arg(out)
            .arg(spec)
            .output()
            .unwrap()
    }
}

impl Drop for LocalSlurm {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(script()).arg("stop").env("TRAINBENCH_SLURM_DIR", self.dir.path()).output();
    }
}

fn text(o: &std::process::Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

fn index_ids(out: &Path) -> Vec<String> {
    let index = read_json(&out.join("slurm-smoke/index.json"));
    let mut ids: Vec<String> =
        index["runs"].as_array().unwrap().iter().map(|e| e["run_id"].as_str().unwrap().to_string()).collect();
    ids.sort();
    ids
}

#[test]
fn a_suite_runs_as_a_job_array_and_only_the_failed_task_is_resubmitted() {
    let Some(slurm) = LocalSlurm::start() else { return };
    let work = tempfile::tempdir().unwrap();
    let spec = work.path().join("spec.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let out = work.path().join("out");
    // The injected bad run: a folder where the b16 result goes, so its task cannot write it and fails.
    let blocked = out.join("slurm-smoke").join(format!("{}.json", RUNS[1]));
    std::fs::create_dir_all(blocked.join("in-the-way")).unwrap();

    let first = slurm.submit_and_wait(&spec, &out);
    let shown = text(&first);
    assert_eq!(first.status.code(), Some(1), "one task failed: {shown}");
    assert!(shown.contains("3 tasks: 2 done, 1 failed, 0 running, 0 pending, 0 missing"), "{shown}");
    // The failed task is reported with its log, whose tail says what went wrong.
    assert!(shown.contains(&format!("task 1 ({}) failed", RUNS[1])), "{shown}");
    assert!(shown.contains("  log: ") && shown.contains(&blocked.display().to_string()), "{shown}");

    let submission = out.join("_slurm");
    let plan = read_json(&submission.join("plan.json"));
    assert_eq!(plan["tasks"].as_array().unwrap().len(), 3);
    let jobs = read_json(&submission.join("jobs.json"));
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 1);
    assert_eq!(jobs["jobs"][0]["tasks"], serde_json::json!([0, 1, 2]));
    let first_job = jobs["jobs"][0]["job"].as_u64().unwrap();
    assert!(submission.join(format!("logs/{first_job}_1.out")).is_file());
    for (task, id) in [(0, RUNS[0]), (2, RUNS[2])] {
        let r = read_json(&out.join(format!("slurm-smoke/{id}.json")));
        assert_eq!(r["outcome"]["status"], "completed", "{id}");
        assert_eq!(r["run_id"], id);
        // The result names the array task that made it and the node it ran on.
        let job = &r["environment"]["scheduler"];
        assert_eq!(job["kind"], "slurm", "{r}");
        assert_eq!(job["array_job_id"], first_job.to_string(), "{r}");
        assert_eq!(job["array_task_id"], task.to_string(), "{r}");
        assert_eq!(job["partition"], "debug", "{r}");
        assert!(job["nodes"].as_str().is_some_and(|n| !n.is_empty()) && r["environment"]["hostname"].is_string());
    }
    assert_eq!(index_ids(&out), vec![RUNS[2].to_string(), RUNS[0].to_string()]);
    let kept = std::fs::read(out.join(format!("slurm-smoke/{}.json", RUNS[0]))).unwrap();

    // `status` alone says the same, and fails while a run is failed.
    let status = slurm.trainbench().arg("status").arg(&out).output().unwrap();
    assert_eq!(status.status.code(), Some(1), "{}", text(&status));
    assert!(text(&status).contains("1 failed"), "{}", text(&status));

    // Clear the way and resume: only task 1 is submitted again, the finished runs stay as they were.
    std::fs::remove_dir_all(&blocked).unwrap();
    let resumed =
        slurm.trainbench().args(["status", "--resume", "--wait", "--poll", "0.5"]).arg(&out).output().unwrap();
    let shown = text(&resumed);
    assert!(resumed.status.success(), "{shown}");
    assert!(shown.contains("3 tasks: 3 done, 0 failed"), "{shown}");
    let jobs = read_json(&submission.join("jobs.json"));
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 2);
    assert_eq!(jobs["jobs"][1]["tasks"], serde_json::json!([1]));
    let r = read_json(&out.join(format!("slurm-smoke/{}.json", RUNS[1])));
    assert_eq!(r["outcome"]["status"], "completed");
    assert_eq!(std::fs::read(out.join(format!("slurm-smoke/{}.json", RUNS[0]))).unwrap(), kept);
    let mut all: Vec<String> = RUNS.iter().map(|s| s.to_string()).collect();
    all.sort();
    assert_eq!(index_ids(&out), all);

    // Nothing left to do: a second resume submits nothing.
    let again = slurm.trainbench().args(["status", "--resume"]).arg(&out).output().unwrap();
    assert!(again.status.success() && text(&again).contains("nothing to resubmit"), "{}", text(&again));
    assert_eq!(read_json(&submission.join("jobs.json"))["jobs"].as_array().unwrap().len(), 2);
}

#[test]
fn a_dry_run_writes_and_prints_the_batch_script_without_slurm() {
    let work = tempfile::tempdir().unwrap();
    let spec = work.path().join("spec.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let out = work.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_trainbench"))
        .args(["run", "--on", "slurm", "--dry-run", "--partition", "debug", "--out"])
        .arg(&out)
        .arg(&spec)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let printed = String::from_utf8_lossy(&o.stdout).into_owned();
    let script = std::fs::read_to_string(out.join("_slurm/array-0.sbatch")).unwrap();
    assert!(printed.contains(&script), "the printed script is the written one:\n{printed}");
    for line in [
        "#SBATCH --array=0-2",
        "#SBATCH --ntasks=1",
        "#SBATCH --partition=debug",
        "#SBATCH --time=4",
        "#SBATCH --signal=B:INT@60",
    ] {
        assert!(script.lines().any(|l| l == line), "{line} missing:\n{script}");
    }
    assert!(script.contains("slurm-task --plan-file") && script.contains("\"$SLURM_ARRAY_TASK_ID\""), "{script}");
    // Nothing was submitted: every task is missing, and the results folder holds no result.
    let s = Command::new(env!("CARGO_BIN_EXE_trainbench"))
        .arg("status")
        .arg(&out)
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(s.status.code(), Some(1), "{}", text(&s));
    assert!(text(&s).contains("3 missing") && text(&s).contains("never submitted"), "{}", text(&s));
    // A dry run again replaces a submission that was never submitted.
    let again = Command::new(env!("CARGO_BIN_EXE_trainbench"))
        .args(["run", "--on", "slurm", "--dry-run", "--out"])
        .arg(&out)
        .arg(&spec)
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", text(&again));
    // One that was submitted is refused, and kept beside the new one with `--overwrite`, which also keeps the
    // results it would replace in the new submission's attempts.
    let jobs = r#"{"jobs":[{"job":1,"script":"array-0.sbatch","tasks":[0],"submitted_at":"x"}]}"#;
    std::fs::write(out.join("_slurm/jobs.json"), jobs).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/results/fixture-mlp/fixture-mlp.b8.fp32.1x1.r0.json");
    let earlier = out.join(format!("slurm-smoke/{}.json", RUNS[0]));
    std::fs::create_dir_all(earlier.parent().unwrap()).unwrap();
    std::fs::copy(&fixture, &earlier).unwrap();
    let dry = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_trainbench"))
            .args(["run", "--on", "slurm", "--dry-run"])
            .args(extra)
            .arg("--out")
            .arg(&out)
            .arg(&spec)
            .output()
            .unwrap()
    };
    let refused = dry(&[]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(text(&refused).contains("already holds 1 result file"), "{}", text(&refused));
    std::fs::rename(&earlier, work.path().join("aside.json")).unwrap();
    let refused = dry(&[]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(text(&refused).contains("already holds a Slurm submission"), "{}", text(&refused));
    std::fs::rename(work.path().join("aside.json"), &earlier).unwrap();
    let replaced = dry(&["--overwrite"]);
    assert!(replaced.status.success(), "{}", text(&replaced));
    assert!(!earlier.exists() && out.join(format!("_slurm/attempts/{}.json", RUNS[0])).is_file());
    let kept: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("_slurm-"))
        .collect();
    assert_eq!(kept.len(), 1, "the earlier submission is kept: {kept:?}");
    assert!(out.join(&kept[0]).join("jobs.json").is_file());
    // A folder without a submission is an input error that says how to make one.
    let none = Command::new(env!("CARGO_BIN_EXE_trainbench")).arg("status").arg(work.path()).output().unwrap();
    assert_eq!(none.status.code(), Some(2), "{}", text(&none));
    assert!(text(&none).contains("holds no Slurm submission"), "{}", text(&none));
    // Slurm options without `--on slurm` are refused, not ignored.
    let local = Command::new(env!("CARGO_BIN_EXE_trainbench"))
        .args(["run", "--partition", "debug", "--out"])
        .arg(work.path().join("local"))
        .arg(&spec)
        .output()
        .unwrap();
    assert_eq!(local.status.code(), Some(2), "{}", text(&local));
    assert!(text(&local).contains("--partition is an option of `--on slurm`"), "{}", text(&local));
}

/// A data-parallel run on Slurm: world size 2 on tch becomes an `srun --mpi=pmix --ntasks=2` step whose ranks
/// find their rank in srun's variables; rank 0 writes the result, which records srun as the launcher. Needs the
/// `tch` and `mpi` features (the mock backend simulates topologies in one process, so it has no ranks).
#[cfg(all(feature = "tch", feature = "mpi"))]
#[test]
fn a_world_size_2_run_is_an_srun_step_of_two_ranks() {
    const DP: &str = r#"
version = 1
name = "slurm-dp"
[model]
family = "mlp"
inputs = 32
hidden = [64]
classes = 10
[sweep]
batch_sizes = [16]
topologies = [
  { devices_per_node = 1, strategy = "single" },
  { devices_per_node = 2, strategy = "all-reduce" },
  { devices_per_node = 2, strategy = "zero-2" },
]
[topology]
backend = "tch"
device = "cpu"
[run]
warmup = 1
iterations = 5
timeout_s = 240
"#;
    let Some(slurm) = LocalSlurm::start() else { return };
    let work = tempfile::tempdir().unwrap();
    let spec = work.path().join("dp.toml");
    std::fs::write(&spec, DP).unwrap();
    let out = work.path().join("out");
    let o = slurm.submit_and_wait(&spec, &out);
    let shown = text(&o);
    assert!(o.status.success(), "{shown}");
    assert!(shown.contains("3 tasks: 3 done, 0 failed"), "{shown}");
    let script = std::fs::read_to_string(out.join("_slurm/array-1.sbatch")).unwrap();
    assert!(script.contains("#SBATCH --ntasks=2") && script.contains("srun --mpi=pmix --ntasks=2"), "{script}");
    // The node is asked which shared-memory copy its ranks may use, unless the user's environment says.
    assert!(
        script.contains("single_copy_mechanism:-$(\"$TRAINBENCH\" single-copy 2>/dev/null || echo none)"),
        "{script}"
    );
    let single = read_json(&out.join("slurm-dp/slurm-dp.b16.fp32.1x1.r0.json"));
    assert_eq!(single["outcome"]["status"], "completed", "{single}");
    // ZeRO goes the same way as all-reduce.
    for (topology, strategy) in [("1x2-ar", "all-reduce"), ("1x2-z2", "zero-2")] {
        let pair = read_json(&out.join(format!("slurm-dp/slurm-dp.b16.fp32.{topology}.r0.json")));
        assert_eq!(pair["outcome"]["status"], "completed", "{pair}");
        assert_eq!(pair["distributed"]["world_size"], 2, "{pair}");
        assert_eq!(pair["distributed"]["launcher"], "srun", "{pair}");
        assert_eq!(pair["distributed"]["strategy"], strategy, "{pair}");
    }
    let ids = {
        let index = read_json(&out.join("slurm-dp/index.json"));
        index["runs"].as_array().unwrap().len()
    };
    assert_eq!(ids, 3);
}

/// Mesh runs on Slurm: a tiny ViT's TP2 and PP2 (1F1B) runs are `srun` steps of two ranks in the suite's job
/// array, whose ranks split their tensor or pipeline group from srun's world and train what the array's one-rank
/// task trains (losses within 1e-4, relative), each rank's coordinates recorded. Needs the `tch` and `mpi`
/// features.
#[cfg(all(feature = "tch", feature = "mpi"))]
#[test]
fn tensor_and_pipeline_runs_are_srun_steps_that_train_what_one_rank_trains() {
    const MESH: &str = concat!(
        r#"
version = 1
name = "slurm-mesh"
"#,
        tiny_vit_model_and_training!(),
        r#"[sweep]
batch_sizes = [4]
topologies = [
  { devices_per_node = 1, strategy = "single" },
  { devices_per_node = 2, strategy = "all-reduce", tensor_parallel = 2 },
  { devices_per_node = 2, strategy = "all-reduce", pipeline_parallel = 2 },
]
[topology]
backend = "tch"
device = "cpu"
overlap = false
microbatches = 2
pipeline_schedule = "1f1b"
[run]
warmup = 0
iterations = 5
timeout_s = 240
cpu_threads = 1
"#
    );
    let Some(slurm) = LocalSlurm::start() else { return };
    let work = tempfile::tempdir().unwrap();
    let spec = work.path().join("mesh.toml");
    std::fs::write(&spec, MESH).unwrap();
    let out = work.path().join("out");
    let o = slurm.submit_and_wait(&spec, &out);
    let shown = text(&o);
    assert!(o.status.success(), "{shown}");
    assert!(shown.contains("3 tasks: 3 done, 0 failed"), "{shown}");
    let results: Vec<Value> = std::fs::read_dir(out.join("slurm-mesh"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json") && !p.ends_with("index.json"))
        .map(|p| read_json(&p))
        .collect();
    assert_eq!(results.len(), 3, "{shown}");
    let loss =
        |r: &Value| (r["metrics"]["loss"]["first"].as_f64().unwrap(), r["metrics"]["loss"]["last"].as_f64().unwrap());
    let single = results.iter().find(|r| r["distributed"].is_null()).expect("the one-rank task's result");
    let (a0, a1) = loss(single);
    for mesh in results.iter().filter(|r| !r["distributed"].is_null()) {
        let d = &mesh["distributed"];
        assert_eq!(mesh["outcome"]["status"], "completed", "{mesh}");
        assert_eq!(d["launcher"], "srun", "{d}");
        assert_eq!(d["world_size"], 2, "{d}");
        let (b0, b1) = loss(mesh);
        for (x, y) in [(a0, b0), (a1, b1)] {
            assert!((x - y).abs() <= 1e-4 * x.abs(), "loss {y} on {}, {x} on one rank", mesh["run_id"]);
        }
        assert!(d["ranks"].as_array().unwrap().iter().all(|r| !r["coords"].is_null()), "{d}");
    }
    let piped = results.iter().filter(|r| !r["distributed"]["pipeline"].is_null()).count();
    assert_eq!(piped, 1, "the PP2 run records its pipeline");
}

/// `trainbench single-copy`, which a batch script runs on the node before `srun`, prints the shared-memory copy
/// local MPI ranks may use there: the probe's answer (`cma` where `process_vm_readv` reads a child's memory).
#[test]
fn single_copy_prints_the_probes_answer_for_this_machine() {
    let out = Command::new(env!("CARGO_BIN_EXE_trainbench")).arg("single-copy").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let expected = if trainbench::runner::dist::single_copy::cross_memory_attach_works() { "cma" } else { "none" };
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), expected);
}
